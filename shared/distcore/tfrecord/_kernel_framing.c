/* Where the records lie and whether they hold: framing.py's walks, in C.
 *   chain    follows valid headers from a position (framing._chain)
 *   crc_ok   the CRC of given records (framing._headers_ok: header CRCs while resyncing)
 *   records  the data CRC of the records a chain found (framing._records)
 *   tiles    which records make up each file of a group laid back to back (many._tiles)
 * The walks run without the GIL: the buffer views pin the memory they read.
 */
#include "_kernel.h"

/* --- chain ------------------------------------------------------------------------------ */

PyObject *kernel_chain(PyObject *self, PyObject *args) {
    PyObject *obj;
    Py_ssize_t pos, size;
    if (!PyArg_ParseTuple(args, "Onn", &obj, &pos, &size)) return NULL;
    Bytes b;
    if (kernel_get_bytes(obj, &b, 0) < 0) return NULL;
    if (pos < 0 || size < 0 || size > b.len) {
        PyBuffer_Release(&b.view);
        PyErr_SetString(PyExc_ValueError, "range outside the buffer");
        return NULL;
    }
    /* Room for every record that could start in the range (at least HEADER + FOOTER bytes
     * each), so that the walk needs no Python object and runs without the GIL. */
    Py_ssize_t cap = size > pos ? (size - pos) / (HEADER + FOOTER) + 1 : 1, count = 0;
    PyObject *heads = PyByteArray_FromStringAndSize(NULL, cap * 8);
    if (heads == NULL) {
        PyBuffer_Release(&b.view);
        return NULL;
    }
    char *out = PyByteArray_AsString(heads);
    Py_BEGIN_ALLOW_THREADS /* the view pins the buffer: nothing can resize it */
    while (pos <= size - HEADER && count < cap) {
        uint64_t length = u64_at(b.data + pos);
        uint32_t crc = u32_at(b.data + pos + 8);
        if (length > MAX_RECORD || (length == 0 && crc == 0)) break;
        if ((uint64_t)(size - pos) < length + HEADER + FOOTER) break;
        if (kernel_masked_crc(b.data + pos, 8) != crc) break;
        int64_t h = pos;
        memcpy(out + 8 * count++, &h, 8);
        pos += (Py_ssize_t)length + HEADER + FOOTER;
    }
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&b.view);
    if (PyByteArray_Resize(heads, count * 8) < 0) {
        Py_DECREF(heads);
        return NULL;
    }
    return Py_BuildValue("(Nn)", heads, pos);
}

/* --- crc_ok ----------------------------------------------------------------------------- */

PyObject *kernel_crc_ok(PyObject *self, PyObject *args) {
    PyObject *obj, *s_obj, *l_obj;
    if (!PyArg_ParseTuple(args, "OOO", &obj, &s_obj, &l_obj)) return NULL;
    Bytes b, starts, lengths;
    Py_ssize_t n, n2;
    if (kernel_get_bytes(obj, &b, 0) < 0) return NULL;
    if (kernel_get_i64(s_obj, &starts, &n) < 0) goto fail_b;
    if (kernel_get_i64(l_obj, &lengths, &n2) < 0) goto fail_s;
    PyObject *out = NULL;
    if (n != n2) {
        PyErr_SetString(PyExc_ValueError, "starts and lengths differ in length");
    } else if (kernel_check_records(&starts, &lengths, n, b.len) == 0) {
        out = PyByteArray_FromStringAndSize(NULL, n);
        if (out != NULL) {
            char *ok = PyByteArray_AsString(out);
            Py_BEGIN_ALLOW_THREADS /* the views pin the buffers: nothing can resize them */
            for (Py_ssize_t i = 0; i < n; i++) {
                int64_t s = i64_item(&starts, i), l = i64_item(&lengths, i);
                ok[i] = kernel_masked_crc(b.data + s, (size_t)l) == u32_at(b.data + s + l);
            }
            Py_END_ALLOW_THREADS
        }
    }
    PyBuffer_Release(&lengths.view);
    PyBuffer_Release(&starts.view);
    PyBuffer_Release(&b.view);
    return out;
fail_s:
    PyBuffer_Release(&starts.view);
fail_b:
    PyBuffer_Release(&b.view);
    return NULL;
}

/* --- records: framing._check_data, the data CRC of each record the chain found ------------ */

/* Whether the record whose header is at h has the data CRC it says (heads_inside held). */
static inline int data_ok(const Bytes *b, int64_t h) {
    int64_t s = h + HEADER, l = (int64_t)u64_at(b->data + h);
    return kernel_masked_crc(b->data + s, (size_t)l) == u32_at(b->data + s + l);
}

/* Each head's record, data and footer, must lie in the buffer before its PAD bytes. */
static int heads_inside(const Bytes *b, const Bytes *heads, Py_ssize_t n) {
    for (Py_ssize_t i = 0; i < n; i++) {
        int64_t h = i64_item(heads, i);
        if (h < 0 || h > (int64_t)b->len - PAD - HEADER ||
            u64_at(b->data + h) > (uint64_t)(b->len - PAD - HEADER - h)) {
            PyErr_SetString(PyExc_ValueError, "record outside the buffer");
            return -1;
        }
    }
    return 0;
}

/* The heads whose data CRC fails, appended to `bad`: rare, so found again, with the GIL,
 * rather than making Python objects in the GIL-free loop. */
static int append_bad(const Bytes *b, const Bytes *heads, Py_ssize_t n, PyObject *bad) {
    for (Py_ssize_t i = 0; i < n; i++) {
        int64_t h = i64_item(heads, i);
        if (data_ok(b, h)) continue;
        PyObject *head = PyLong_FromLongLong(h);
        if (head == NULL || PyList_Append(bad, head) < 0) {
            Py_XDECREF(head);
            return -1;
        }
        Py_DECREF(head);
    }
    return 0;
}

/* records(buf, heads) -> (starts, lengths, bad heads): each record's data start and length
 * where its data CRC holds, in order, and the heads of those where it does not. */
PyObject *kernel_records(PyObject *self, PyObject *args) {
    PyObject *obj, *h_obj;
    if (!PyArg_ParseTuple(args, "OO", &obj, &h_obj)) return NULL;
    Bytes b, heads;
    Py_ssize_t n;
    if (kernel_get_bytes(obj, &b, 0) < 0) return NULL;
    if (kernel_get_i64(h_obj, &heads, &n) < 0) {
        PyBuffer_Release(&b.view);
        return NULL;
    }
    PyObject *starts = NULL, *lengths = NULL, *bad = NULL, *result = NULL;
    if (heads_inside(&b, &heads, n) < 0) goto done;
    starts = PyByteArray_FromStringAndSize(NULL, n * 8);
    lengths = PyByteArray_FromStringAndSize(NULL, n * 8);
    bad = PyList_New(0);
    if (starts == NULL || lengths == NULL || bad == NULL) goto done;
    int64_t *s_out = (int64_t *)PyByteArray_AsString(starts);
    int64_t *l_out = (int64_t *)PyByteArray_AsString(lengths);
    Py_ssize_t kept = 0, wrong = 0;
    Py_BEGIN_ALLOW_THREADS /* the views pin the buffers: nothing can resize them */
    for (Py_ssize_t i = 0; i < n; i++) {
        int64_t h = i64_item(&heads, i), s = h + HEADER;
        int64_t l = (int64_t)u64_at(b.data + h);
        if (data_ok(&b, h)) {
            memcpy(s_out + kept, &s, 8);
            memcpy(l_out + kept, &l, 8);
            kept++;
        } else {
            wrong++;
        }
    }
    Py_END_ALLOW_THREADS
    if (wrong && append_bad(&b, &heads, n, bad) < 0) goto done;
    if (PyByteArray_Resize(starts, kept * 8) < 0 || PyByteArray_Resize(lengths, kept * 8) < 0)
        goto done;
    result = Py_BuildValue("(OOO)", starts, lengths, bad);
done:
    Py_XDECREF(starts);
    Py_XDECREF(lengths);
    Py_XDECREF(bad);
    PyBuffer_Release(&heads.view);
    PyBuffer_Release(&b.view);
    return result;
}

/* --- tiles: many._tiles, where each file of a group lies among its records ----------- */

/* The first k in [0, n) with items[k] >= x (n if none): np.searchsorted's "left". */
static Py_ssize_t lower_bound(const Bytes *items, Py_ssize_t n, int64_t x) {
    Py_ssize_t lo = 0, hi = n;
    while (lo < hi) {
        Py_ssize_t mid = lo + (hi - lo) / 2;
        if (i64_item(items, mid) < x) lo = mid + 1;
        else hi = mid;
    }
    return lo;
}

/* tiles(starts, lengths, end, trouble, bases, sizes) -> (firsts, lasts, tiled): for each span
 * (base, size) its records [first, last) (by their headers' offsets) and whether they cover it
 * exactly, edge to edge, with no problem offset (`trouble`, sorted) inside and nothing past
 * `end`. starts must ascend (frame() gives them so). */
PyObject *kernel_tiles(PyObject *self, PyObject *args) {
    PyObject *o_starts, *o_lengths, *o_trouble, *o_bases, *o_sizes;
    long long end;
    if (!PyArg_ParseTuple(args, "OOLOOO", &o_starts, &o_lengths, &end, &o_trouble, &o_bases,
                          &o_sizes))
        return NULL;
    PyObject *objs[5] = {o_starts, o_lengths, o_trouble, o_bases, o_sizes};
    Bytes v[5];
    Py_ssize_t n[5];
    int got = 0;
    PyObject *firsts = NULL, *lasts = NULL, *tiled = NULL, *result = NULL;
    for (; got < 5; got++)
        if (kernel_get_i64(objs[got], &v[got], &n[got]) < 0) goto done;
    if (n[0] != n[1] || n[3] != n[4]) {
        PyErr_SetString(PyExc_ValueError, "columns of different lengths");
        goto done;
    }
    Py_ssize_t records = n[0], spans = n[3];
    const Bytes *starts = &v[0], *lengths = &v[1], *trouble = &v[2];
    firsts = PyByteArray_FromStringAndSize(NULL, spans * 8);
    lasts = PyByteArray_FromStringAndSize(NULL, spans * 8);
    tiled = PyByteArray_FromStringAndSize(NULL, spans);
    if (firsts == NULL || lasts == NULL || tiled == NULL) goto done;
    /* heads: starts - HEADER; a record ends at start + length + FOOTER */
    for (Py_ssize_t i = 0; i < spans; i++) {
        int64_t base = i64_item(&v[3], i), stop = base + i64_item(&v[4], i);
        /* first head >= base  <=>  first start >= base + HEADER */
        Py_ssize_t first = lower_bound(starts, records, base + HEADER);
        Py_ssize_t last = lower_bound(starts, records, stop + HEADER);
        int ok = lower_bound(trouble, n[2], base) == lower_bound(trouble, n[2], stop) &&
                 stop <= end;
        if (ok && first == last) {
            ok = stop == base;
        } else if (ok) {
            ok = i64_item(starts, first) - HEADER == base &&
                 i64_item(starts, last - 1) + i64_item(lengths, last - 1) + FOOTER == stop;
            for (Py_ssize_t k = first; ok && k + 1 < last; k++)
                ok = i64_item(starts, k + 1) - HEADER ==
                     i64_item(starts, k) + i64_item(lengths, k) + FOOTER;
        }
        int64_t f = first, l = last;
        memcpy(PyByteArray_AsString(firsts) + 8 * i, &f, 8);
        memcpy(PyByteArray_AsString(lasts) + 8 * i, &l, 8);
        PyByteArray_AsString(tiled)[i] = (char)ok;
    }
    result = Py_BuildValue("(OOO)", firsts, lasts, tiled);
done:
    Py_XDECREF(firsts);
    Py_XDECREF(lasts);
    Py_XDECREF(tiled);
    for (int g = 0; g < got; g++) PyBuffer_Release(&v[g].view);
    return result;
}
