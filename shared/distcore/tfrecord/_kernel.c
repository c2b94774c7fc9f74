/* distcore.tfrecord._kernel: the decoder's fast path, its hot loops one record at a time in C.
 *
 * An optional extension (setup.py): where it is not built, the reference path (plain Python:
 * framing.py's walks and the per-record decoder, record.py) reads instead, and the tests check
 * both give the same batches. Each function here accepts exactly what the reference accepts:
 *   chain(buf, pos, size)           framing._chain, the header CRCs checked on the way
 *   crc_ok(buf, starts, lengths)    masked CRC-32C of each record's data against its footer
 *   records(buf, heads)             framing._records: the records whose data CRC holds
 *   scalars(buf, starts, lengths, keys, f32, f64, md, max_tag)
 *                                   the one-scalar records (batch.py), tags interned exactly
 *   by_tag(tag_ids, n, steps, walls, values)
 *                                   a stable sort by tag (batch._by_tag), as a counting sort
 *   split(tag_ids, n, bounds, steps, walls, values)
 *                                   by_tag for each file of a group (tfrecord/many.py)
 *   stats(steps, values)            series._increasing, _fmin and _fmax of a first read
 *   tiles(starts, lengths, end, trouble, bases, sizes)
 *                                   many._tiles: each file's records, and if they tile it
 *   hparams_event(data, keys, plugin)
 *                                   record.decode_event of the hparams plugin's usual record
 * `buf` is any buffer (a bytearray); every read stays inside it: positions are clamped to
 * len(buf) - 16, and reads go at most 15 bytes past that.
 * Arrays go in and out as bytes-like objects of native int64/float64/bool; the Python side
 * wraps them with np.frombuffer (no numpy headers needed to build).
 *
 * The sources, one purpose each, all built into this one module (setup.py lists them):
 *   _kernel.h            what they share: constants, the inline readers, the kernel_ names
 *   _kernel.c            this file: the method table, the module, argument checks
 *   _kernel_crc.c        CRC-32C, table-driven and SSE4.2
 *   _kernel_framing.c    chain, crc_ok, records, tiles: where records lie and whether they hold
 *   _kernel_scalars.c    scalars: the one-scalar fast path and its tag interning
 *   _kernel_columns.c    by_tag, split, stats: decoded points regrouped and summarised
 *   _kernel_hparams.c    hparams_event
 * Each hot loop lives within one file, so the compiler sees all of it.
 */
#include "_kernel.h"

/* --- arguments ------------------------------------------------------------------------------ */

int kernel_get_bytes(PyObject *obj, Bytes *out, int writable) {
    if (PyObject_GetBuffer(obj, &out->view, writable ? PyBUF_WRITABLE : PyBUF_SIMPLE) < 0)
        return -1;
    out->data = (const uint8_t *)out->view.buf;
    out->len = out->view.len;
    return 0;
}

/* An int64 array's bytes, as (pointer, count). */
int kernel_get_i64(PyObject *obj, Bytes *out, Py_ssize_t *count) {
    if (kernel_get_bytes(obj, out, 0) < 0) return -1;
    if (out->len % 8) {
        PyBuffer_Release(&out->view);
        PyErr_SetString(PyExc_ValueError, "expected int64 data");
        return -1;
    }
    *count = out->len / 8;
    return 0;
}

/* The records must lie in the buffer with PAD bytes after them: the decoder's contract. */
int kernel_check_records(const Bytes *starts, const Bytes *lengths, Py_ssize_t n,
                         Py_ssize_t buflen) {
    for (Py_ssize_t i = 0; i < n; i++) {
        int64_t s = i64_item(starts, i), l = i64_item(lengths, i);
        if (s < 0 || l < 0 || l > (int64_t)buflen || s > (int64_t)buflen - PAD - l) {
            PyErr_SetString(PyExc_ValueError, "record outside the buffer");
            return -1;
        }
    }
    return 0;
}

/* --- module --------------------------------------------------------------------------------- */

static PyMethodDef methods[] = {
    {"chain", kernel_chain, METH_VARARGS,
     "chain(buf, pos, size) -> (heads, stop): follow valid headers of whole records."},
    {"records", kernel_records, METH_VARARGS,
     "records(buf, heads) -> (starts, lengths, bad heads): framing._check_data."},
    {"crc_ok", kernel_crc_ok, METH_VARARGS,
     "crc_ok(buf, starts, lengths) -> bools: each record's data CRC holds."},
    {"scalars", kernel_scalars, METH_VARARGS,
     "scalars(buf, starts, lengths, keys, f32, f64, md, max_tag) -> the fast path's columns."},
    {"by_tag", kernel_by_tag, METH_VARARGS,
     "by_tag(tag_ids, n, steps, walls, values) -> (edges, steps, walls, values): _by_tag."},
    {"split", kernel_split, METH_VARARGS,
     "split(tag_ids, n, bounds, steps, walls, values) -> each file's by_tag, its own memory."},
    {"stats", kernel_stats, METH_VARARGS,
     "stats(steps, values) -> (increasing, low, high): a series' first read."},
    {"tiles", kernel_tiles, METH_VARARGS,
     "tiles(starts, lengths, end, trouble, bases, sizes) -> (firsts, lasts, tiled)."},
    {"hparams_event", kernel_hparams_event, METH_VARARGS,
     "hparams_event(data, keys, plugin) -> (wall, step, tag, hparams) or None: decode_event."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_kernel", NULL, -1, methods, NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__kernel(void) {
    kernel_crc_init();
    return PyModule_Create(&module);
}
