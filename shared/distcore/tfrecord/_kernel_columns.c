/* Decoded points regrouped and summarised: batch.py's, many.py's and series.py's loops.
 *   by_tag   one file's points ordered tag by tag (batch._by_tag)
 *   split    the same for each file of a group, each file's memory its own (many.py)
 *   stats    what a series' first read needs of its points (series.py)
 */
#include "_kernel.h"

/* The three point columns (steps, walls, values), each as long as the tag ids: *got is how
 * many views are held (to release) when it fails. */
static int get_columns(PyObject *objs[3], Bytes cols[3], Py_ssize_t n, Py_ssize_t *got) {
    for (*got = 0; *got < 3; (*got)++) {
        Py_ssize_t count;
        if (kernel_get_i64(objs[*got], &cols[*got], &count) < 0) return -1;
        if (count != n) {
            PyBuffer_Release(&cols[*got].view);
            PyErr_SetString(PyExc_ValueError, "columns of different lengths");
            return -1;
        }
    }
    return 0;
}

/* --- by_tag: one file's points ------------------------------------------------------------- */

/* The counting pass of by_tag: [(tag id, first, end)] for each tag present, ascending, and
 * next[t] turned into where tag t's points start. next has names + 1 zeroed slots. */
static PyObject *tag_edges(const Bytes *ids, Py_ssize_t n, Py_ssize_t names, Py_ssize_t *next) {
    for (Py_ssize_t i = 0; i < n; i++) {
        int64_t id = i64_item(ids, i);
        if (id < 0 || id >= names) {
            PyErr_SetString(PyExc_ValueError, "tag id out of range");
            return NULL;
        }
        next[id + 1]++;
    }
    PyObject *edges = PyList_New(0);
    if (edges == NULL) return NULL;
    for (Py_ssize_t t = 0; t < names; t++) {
        Py_ssize_t lo = next[t], hi = lo + next[t + 1];
        if (hi > lo) {
            PyObject *edge = Py_BuildValue("(nnn)", t, lo, hi);
            if (edge == NULL || PyList_Append(edges, edge) < 0) {
                Py_XDECREF(edge);
                Py_DECREF(edges);
                return NULL;
            }
            Py_DECREF(edge);
        }
        next[t + 1] = hi; /* now: where tag t + 1's points start */
    }
    return edges;
}

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
    if (get_columns(o_cols, cols, n, &got) < 0) goto done;
    next = PyMem_Calloc((size_t)names + 1, sizeof(Py_ssize_t));
    if (next == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    if ((edges = tag_edges(&ids, n, names, next)) == NULL) goto done;
    for (int c = 0; c < 3; c++)
        if ((out[c] = PyByteArray_FromStringAndSize(NULL, n * 8)) == NULL) goto done;
    uint8_t *dst[3] = {(uint8_t *)PyByteArray_AsString(out[0]),
                       (uint8_t *)PyByteArray_AsString(out[1]),
                       (uint8_t *)PyByteArray_AsString(out[2])};
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

/* --- split: each file of a group ----------------------------------------------------------- */

/* split's arguments: views held until split_close (`got` of the columns). */
typedef struct {
    Bytes ids, bounds, cols[3];
    Py_ssize_t n, names, files, got;
} Split;

/* split's memory: PyMem arrays, and each file's bytearray (none for a file without points). */
typedef struct {
    int64_t *count, *start; /* by tag id: a file's points of it, then where they go */
    int64_t *seen;          /* each file's tags, in turn */
    int64_t *used;          /* all files' (tag id, first point), file f's from ufirst[f] */
    Py_ssize_t *ufirst;
    PyObject **bufs;
    uint8_t **dst; /* each bytearray's memory, found with the GIL for the sort without it */
} SplitWork;

static void split_close(Split *s) {
    for (Py_ssize_t c = 0; c < s->got; c++) PyBuffer_Release(&s->cols[c].view);
    PyBuffer_Release(&s->bounds.view);
    PyBuffer_Release(&s->ids.view);
}

static int split_open(PyObject *args, Split *s) {
    PyObject *o_ids, *o_bounds, *o_cols[3];
    Py_ssize_t nb;
    if (!PyArg_ParseTuple(args, "OnOOOO", &o_ids, &s->names, &o_bounds, &o_cols[0], &o_cols[1],
                          &o_cols[2]))
        return -1;
    if (s->names < 0 || s->names > PY_SSIZE_T_MAX / 16) {
        PyErr_SetString(PyExc_ValueError, "bad number of tags");
        return -1;
    }
    if (kernel_get_i64(o_ids, &s->ids, &s->n) < 0) return -1;
    if (kernel_get_i64(o_bounds, &s->bounds, &nb) < 0) {
        PyBuffer_Release(&s->ids.view);
        return -1;
    }
    s->files = nb - 1;
    if (get_columns(o_cols, s->cols, s->n, &s->got) < 0) {
        split_close(s);
        return -1;
    }
    return 0;
}

/* The bounds must cut the columns into files in order, and every tag id be < names. */
static int split_check(const Split *s) {
    Py_ssize_t files = s->files;
    int covered = files >= 0 && i64_item(&s->bounds, 0) == 0 &&
                  i64_item(&s->bounds, files) == s->n;
    for (Py_ssize_t f = 0; covered && f < files; f++)
        covered = i64_item(&s->bounds, f) <= i64_item(&s->bounds, f + 1);
    if (!covered) {
        PyErr_SetString(PyExc_ValueError, "bounds do not cover the columns");
        return -1;
    }
    for (Py_ssize_t i = 0; i < s->n; i++) {
        int64_t id = i64_item(&s->ids, i);
        if (id < 0 || id >= s->names) {
            PyErr_SetString(PyExc_ValueError, "tag id out of range");
            return -1;
        }
    }
    return 0;
}

static Py_ssize_t file_points(const Split *s, Py_ssize_t f) {
    return (Py_ssize_t)(i64_item(&s->bounds, f + 1) - i64_item(&s->bounds, f));
}

/* Everything the sort writes, made with the GIL, so that the sort itself needs none. */
static int split_alloc(const Split *s, SplitWork *w) {
    Py_ssize_t names = s->names, n = s->n, files = s->files;
    w->count = PyMem_Calloc((size_t)names + 1, sizeof(int64_t));
    w->start = PyMem_Calloc((size_t)names + 1, sizeof(int64_t));
    w->seen = PyMem_Malloc(((size_t)n + 1) * sizeof(int64_t));
    w->used = PyMem_Malloc(((size_t)n + 1) * 2 * sizeof(int64_t));
    w->bufs = PyMem_Calloc((size_t)files + 1, sizeof(PyObject *));
    w->dst = PyMem_Calloc((size_t)files + 1, sizeof(uint8_t *));
    if (!w->count || !w->start || !w->seen || !w->used || !w->bufs || !w->dst) {
        PyErr_NoMemory();
        return -1;
    }
    for (Py_ssize_t f = 0; f < files; f++) {
        Py_ssize_t size = file_points(s, f);
        if (size && (w->bufs[f] = PyByteArray_FromStringAndSize(NULL, size * 24)) == NULL)
            return -1;
        if (size) w->dst[f] = (uint8_t *)PyByteArray_AsString(w->bufs[f]);
    }
    if ((w->ufirst = PyMem_Malloc(((size_t)files + 1) * sizeof(Py_ssize_t))) == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    return 0;
}

static void split_free(SplitWork *w, Py_ssize_t files) {
    if (w->bufs != NULL)
        for (Py_ssize_t f = 0; f < files; f++) Py_XDECREF(w->bufs[f]);
    PyMem_Free(w->bufs);
    PyMem_Free(w->dst);
    PyMem_Free(w->count);
    PyMem_Free(w->start);
    PyMem_Free(w->seen);
    PyMem_Free(w->used);
    PyMem_Free(w->ufirst);
}

static int cmp_i64(const void *a, const void *b) {
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

/* Each file's points into its bytearray, tag by tag (stable), its tags ascending; the files'
 * (tag, first) pairs are left in w->used. Plain memory only: runs without the GIL. */
static void split_sort(const Split *s, SplitWork *w) {
    int64_t *count = w->count, *start = w->start, *seen = w->seen, *used = w->used;
    Py_ssize_t total_used = 0;
    Py_BEGIN_ALLOW_THREADS /* the bytearrays are made, nothing resizes them */
    for (Py_ssize_t f = 0; f < s->files; f++) {
        Py_ssize_t lo = (Py_ssize_t)i64_item(&s->bounds, f), hi = lo + file_points(s, f);
        Py_ssize_t m = hi - lo, d = 0;
        w->ufirst[f] = total_used;
        if (m == 0) continue;
        for (Py_ssize_t i = lo; i < hi; i++) {
            int64_t id = i64_item(&s->ids, i);
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
        uint8_t *dst = w->dst[f];
        for (Py_ssize_t i = lo; i < hi; i++) {
            int64_t j = start[i64_item(&s->ids, i)]++;
            for (int c = 0; c < 3; c++)
                memcpy(dst + 8 * (c * m + j), s->cols[c].data + 8 * i, 8);
        }
    }
    Py_END_ALLOW_THREADS
    w->ufirst[s->files] = total_used;
}

/* File f's (columns, [(tag id, first, end)]), or None when it has no points. */
static PyObject *split_item(const Split *s, const SplitWork *w, Py_ssize_t f) {
    Py_ssize_t m = file_points(s, f);
    if (m == 0) {
        Py_INCREF(Py_None);
        return Py_None;
    }
    Py_ssize_t d = w->ufirst[f + 1] - w->ufirst[f];
    PyObject *spans = PyList_New(d);
    if (spans == NULL) return NULL;
    for (Py_ssize_t k = 0; k < d; k++) {
        const int64_t *u = w->used + 2 * (w->ufirst[f] + k);
        int64_t end = k + 1 < d ? u[3] : (int64_t)m;
        PyObject *span = Py_BuildValue("(LLL)", (long long)u[0], (long long)u[1],
                                       (long long)end);
        if (span == NULL) {
            Py_DECREF(spans);
            return NULL;
        }
        PyList_SetItem(spans, k, span);
    }
    return Py_BuildValue("(ON)", w->bufs[f], spans);
}

/* split(tag_ids, n, bounds, steps, walls, values): by_tag for each of several files at once,
 * file f's points being [bounds[f], bounds[f + 1]) of the columns: for each file None (no
 * points) or (its columns, [(tag id, first, end)] ascending), its columns one writable
 * bytearray of its steps, then walls, then values, each reordered tag by tag (stable). Each
 * file's memory is its own, and the sorting runs without the GIL. */
PyObject *kernel_split(PyObject *self, PyObject *args) {
    Split s = {.got = 0};
    if (split_open(args, &s) < 0) return NULL;
    SplitWork w = {NULL, NULL, NULL, NULL, NULL, NULL, NULL};
    PyObject *result = NULL;
    if (split_check(&s) == 0 && split_alloc(&s, &w) == 0) {
        split_sort(&s, &w);
        result = PyList_New(s.files);
        for (Py_ssize_t f = 0; result != NULL && f < s.files; f++) {
            PyObject *item = split_item(&s, &w, f);
            if (item == NULL) Py_CLEAR(result);
            else PyList_SetItem(result, f, item);
        }
    }
    split_free(&w, s.files);
    split_close(&s);
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
