/* Decoded points regrouped and summarised: batch.py's, plain.py's and series.py's loops.
 *   by_tag   one file's points ordered tag by tag (batch._by_tag)
 *   split    the same for each file of a group, each file's memory its own (plain.py)
 *   stats    what a series' first read needs of its points (series.py)
 */
#include "_kernel.h"

/* --- points by tag ---------------------------------------------------------------------- */

/* batch._by_tag: the points reordered tag by tag (stable: written order within a tag), as
 * np.argsort(tag_ids, kind="stable") orders them, in one counting pass. Returns
 * ([(tag id, first, end)] for each tag present, ascending; steps; walls; values), the columns
 * as writable bytearrays of the input's 8-byte items copied bit for bit. */
PyObject *kernel_by_tag(PyObject *self, PyObject *args) {
    PyObject *o_ids, *o_cols[3];
    Py_ssize_t names;
    if (!PyArg_ParseTuple(args, "OnOOO", &o_ids, &names, &o_cols[0], &o_cols[1], &o_cols[2]))
        return NULL;
    if (names < 0 || names > PY_SSIZE_T_MAX / (Py_ssize_t)sizeof(Py_ssize_t) - 1) {
        PyErr_SetString(PyExc_ValueError, "bad number of tags");
        return NULL;
    }
    Bytes ids, cols[3];
    Py_ssize_t n, got = 0;
    PyObject *out[3] = {NULL, NULL, NULL}, *edges = NULL, *result = NULL;
    Py_ssize_t *next = NULL;
    if (kernel_get_i64(o_ids, &ids, &n) < 0) return NULL;
    for (; got < 3; got++) {
        Py_ssize_t count;
        if (kernel_get_i64(o_cols[got], &cols[got], &count) < 0) goto done;
        if (count != n) {
            PyBuffer_Release(&cols[got].view);
            PyErr_SetString(PyExc_ValueError, "columns of different lengths");
            goto done;
        }
    }
    next = PyMem_Calloc((size_t)names + 1, sizeof(Py_ssize_t));
    if (next == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        int64_t id = i64_item(&ids, i);
        if (id < 0 || id >= names) {
            PyErr_SetString(PyExc_ValueError, "tag id out of range");
            goto done;
        }
        next[id + 1]++;
    }
    edges = PyList_New(0);
    if (edges == NULL) goto done;
    for (Py_ssize_t t = 0; t < names; t++) {
        Py_ssize_t lo = next[t], hi = lo + next[t + 1];
        if (hi > lo) {
            PyObject *edge = Py_BuildValue("(nnn)", t, lo, hi);
            if (edge == NULL || PyList_Append(edges, edge) < 0) {
                Py_XDECREF(edge);
                goto done;
            }
            Py_DECREF(edge);
        }
        next[t + 1] = hi; /* now: where tag t + 1's points start */
    }
    for (int c = 0; c < 3; c++) {
        out[c] = PyByteArray_FromStringAndSize(NULL, n * 8);
        if (out[c] == NULL) goto done;
    }
    uint8_t *dst[3] = {(uint8_t *)PyByteArray_AS_STRING(out[0]),
                       (uint8_t *)PyByteArray_AS_STRING(out[1]),
                       (uint8_t *)PyByteArray_AS_STRING(out[2])};
    for (Py_ssize_t i = 0; i < n; i++) {
        Py_ssize_t j = next[i64_item(&ids, i)]++;
        for (int c = 0; c < 3; c++) memcpy(dst[c] + 8 * j, cols[c].data + 8 * i, 8);
    }
    result = Py_BuildValue("(OOOO)", edges, out[0], out[1], out[2]);
done:
    PyMem_Free(next);
    Py_XDECREF(edges);
    for (int c = 0; c < 3; c++) Py_XDECREF(out[c]);
    for (int c = 0; c < got; c++) PyBuffer_Release(&cols[c].view);
    PyBuffer_Release(&ids.view);
    return result;
}

/* split(tag_ids, n, bounds, steps, walls, values): by_tag for each of several files at once,
 * file f's points being [bounds[f], bounds[f + 1]) of the columns: for each file None (no
 * points) or (its columns, [(tag id, first, end)] ascending), its columns one writable
 * bytearray of its steps, then walls, then values, each reordered tag by tag (stable). Each
 * file's memory is its own, and the sorting runs without the GIL. */
static int cmp_i64(const void *a, const void *b) {
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

PyObject *kernel_split(PyObject *self, PyObject *args) {
    PyObject *o_ids, *o_bounds, *o_cols[3];
    Py_ssize_t names;
    if (!PyArg_ParseTuple(args, "OnOOOO", &o_ids, &names, &o_bounds, &o_cols[0], &o_cols[1],
                          &o_cols[2]))
        return NULL;
    if (names < 0 || names > PY_SSIZE_T_MAX / 16) {
        PyErr_SetString(PyExc_ValueError, "bad number of tags");
        return NULL;
    }
    Bytes ids, bounds, cols[3];
    Py_ssize_t n, nb, got = 0, files = 0;
    PyObject *result = NULL, **bufs = NULL;
    int64_t *count = NULL, *start = NULL, *seen = NULL, *used = NULL;
    if (kernel_get_i64(o_ids, &ids, &n) < 0) return NULL;
    if (kernel_get_i64(o_bounds, &bounds, &nb) < 0) {
        PyBuffer_Release(&ids.view);
        return NULL;
    }
    for (; got < 3; got++) {
        Py_ssize_t c;
        if (kernel_get_i64(o_cols[got], &cols[got], &c) < 0) goto done;
        if (c != n) {
            PyBuffer_Release(&cols[got].view);
            PyErr_SetString(PyExc_ValueError, "columns of different lengths");
            goto done;
        }
    }
    files = nb - 1;
    if (files < 0 || i64_item(&bounds, 0) != 0 || i64_item(&bounds, files) != n) {
        PyErr_SetString(PyExc_ValueError, "bounds do not cover the columns");
        goto done;
    }
    for (Py_ssize_t f = 0; f < files; f++)
        if (i64_item(&bounds, f) > i64_item(&bounds, f + 1)) {
            PyErr_SetString(PyExc_ValueError, "bounds do not cover the columns");
            goto done;
        }
    for (Py_ssize_t i = 0; i < n; i++) {
        int64_t id = i64_item(&ids, i);
        if (id < 0 || id >= names) {
            PyErr_SetString(PyExc_ValueError, "tag id out of range");
            goto done;
        }
    }
    count = PyMem_Calloc((size_t)names + 1, sizeof(int64_t));
    start = PyMem_Calloc((size_t)names + 1, sizeof(int64_t));
    seen = PyMem_Malloc(((size_t)n + 1) * sizeof(int64_t)); /* each file's tags, in turn */
    used = PyMem_Malloc(((size_t)n + 1) * 2 * sizeof(int64_t)); /* all files' (first, count) */
    bufs = PyMem_Calloc((size_t)files + 1, sizeof(PyObject *));
    if (!count || !start || !seen || !used || !bufs) {
        PyErr_NoMemory();
        goto done;
    }
    for (Py_ssize_t f = 0; f < files; f++) {
        Py_ssize_t size = (Py_ssize_t)(i64_item(&bounds, f + 1) - i64_item(&bounds, f));
        if (size && (bufs[f] = PyByteArray_FromStringAndSize(NULL, size * 24)) == NULL) goto done;
    }
    /* used[2 * k]: tag id, used[2 * k + 1]: its first point in its file, for each file's
     * tags in turn (file f's from ufirst[f]); kept in `used` past the GIL-free loop. */
    Py_ssize_t total_used = 0;
    Py_ssize_t *ufirst = PyMem_Malloc(((size_t)files + 1) * sizeof(Py_ssize_t));
    if (ufirst == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    Py_BEGIN_ALLOW_THREADS /* plain memory only: the bytearrays are made, nothing resizes */
    for (Py_ssize_t f = 0; f < files; f++) {
        Py_ssize_t lo = (Py_ssize_t)i64_item(&bounds, f), hi = (Py_ssize_t)i64_item(&bounds, f + 1);
        Py_ssize_t m = hi - lo, d = 0;
        ufirst[f] = total_used;
        if (m == 0) continue;
        for (Py_ssize_t i = lo; i < hi; i++) {
            int64_t id = i64_item(&ids, i);
            if (count[id]++ == 0) seen[d++] = id;
        }
        qsort(seen, (size_t)d, sizeof(int64_t), cmp_i64);
        int64_t acc = 0;
        for (Py_ssize_t k = 0; k < d; k++) {
            int64_t id = seen[k];
            start[id] = acc;
            used[2 * (total_used + k)] = id;
            used[2 * (total_used + k) + 1] = acc;
            acc += count[id];
            count[id] = 0;
        }
        total_used += d;
        uint8_t *dst = (uint8_t *)PyByteArray_AS_STRING(bufs[f]);
        for (Py_ssize_t i = lo; i < hi; i++) {
            int64_t j = start[i64_item(&ids, i)]++;
            for (int c = 0; c < 3; c++)
                memcpy(dst + 8 * (c * m + j), cols[c].data + 8 * i, 8);
        }
    }
    Py_END_ALLOW_THREADS
    ufirst[files] = total_used;
    result = PyList_New(files);
    if (result == NULL) goto free_ufirst;
    for (Py_ssize_t f = 0; f < files; f++) {
        Py_ssize_t m = (Py_ssize_t)(i64_item(&bounds, f + 1) - i64_item(&bounds, f));
        PyObject *item = Py_None;
        if (m == 0) {
            Py_INCREF(Py_None);
        } else {
            Py_ssize_t d = ufirst[f + 1] - ufirst[f];
            PyObject *spans = PyList_New(d);
            if (spans == NULL) goto fail_result;
            for (Py_ssize_t k = 0; k < d; k++) {
                int64_t *u = used + 2 * (ufirst[f] + k);
                int64_t end = k + 1 < d ? u[3] : (int64_t)m;
                PyObject *span = Py_BuildValue("(LLL)", (long long)u[0], (long long)u[1],
                                               (long long)end);
                if (span == NULL) {
                    Py_DECREF(spans);
                    goto fail_result;
                }
                PyList_SET_ITEM(spans, k, span);
            }
            item = Py_BuildValue("(ON)", bufs[f], spans);
            if (item == NULL) goto fail_result;
        }
        PyList_SET_ITEM(result, f, item);
    }
    goto free_ufirst;
fail_result:
    Py_CLEAR(result);
free_ufirst:
    PyMem_Free(ufirst);
done:
    if (bufs != NULL)
        for (Py_ssize_t f = 0; f < files; f++) Py_XDECREF(bufs[f]);
    PyMem_Free(bufs);
    PyMem_Free(count);
    PyMem_Free(start);
    PyMem_Free(seen);
    PyMem_Free(used);
    for (Py_ssize_t c = 0; c < got; c++) PyBuffer_Release(&cols[c].view);
    PyBuffer_Release(&bounds.view);
    PyBuffer_Release(&ids.view);
    return result;
}

/* --- stats: what a series' first read needs of its points ---------------------------------- */

/* stats(steps, values) -> (increasing, low, high): whether the steps strictly increase, and the
 * least and greatest value that is not NaN (NaN when all are), as np.fmin.reduce and
 * np.fmax.reduce find them wherever those are unique values; the caller asks numpy where they
 * may not be (a zero, whose sign numpy's order of comparisons decides, or NaN). */
PyObject *kernel_stats(PyObject *self, PyObject *args) {
    PyObject *o_steps, *o_values;
    if (!PyArg_ParseTuple(args, "OO", &o_steps, &o_values)) return NULL;
    Bytes steps, values;
    Py_ssize_t n, m;
    if (kernel_get_i64(o_steps, &steps, &n) < 0) return NULL;
    if (kernel_get_i64(o_values, &values, &m) < 0) {
        PyBuffer_Release(&steps.view);
        return NULL;
    }
    int increasing = 1;
    double low = Py_NAN, high = Py_NAN;
    for (Py_ssize_t i = 1; i < n && increasing; i++)
        increasing = i64_item(&steps, i) > i64_item(&steps, i - 1);
    for (Py_ssize_t i = 0; i < m; i++) {
        double v;
        memcpy(&v, values.data + 8 * i, 8);
        if (v != v) continue;
        if (low != low || v < low) low = v;
        if (high != high || v > high) high = v;
    }
    PyBuffer_Release(&values.view);
    PyBuffer_Release(&steps.view);
    return Py_BuildValue("(Odd)", increasing ? Py_True : Py_False, low, high);
}

