/* What the kernel's sources (_kernel*.c) share; private to them, never installed.
 *
 * One extension module, distcore.tfrecord._kernel, is built from several files, one purpose
 * each (see _kernel.c for the list). Names they share start with kernel_ and are hidden, so the
 * built .so exports PyInit__kernel alone, as it did when it was one file. The tiny readers the
 * hot loops call for every record are `static inline` here rather than functions in one file,
 * so that splitting the sources cost no inlining.
 */
#ifndef DISTCORE_TFRECORD_KERNEL_H
#define DISTCORE_TFRECORD_KERNEL_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* Records are little-endian and read here with memcpy: on another byte order (or a compiler
 * without these macros) the build fails, and being optional, leaves the reference path. */
#if !defined(__BYTE_ORDER__) || __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "the kernel reads little-endian records natively"
#endif

/* A record's frame: length (8) and its masked CRC (4), the data, the data's masked CRC (4). */
#define HEADER 12
#define FOOTER 4
/* Every buffer the decoder hands in has PAD bytes after its last record (the decoder's
 * contract), which lets the readers here read a few bytes ahead without a bounds check. */
#define PAD 16
#define MAX_RECORD (256u << 20)

/* Shared between the files of this module only: not in the .so's dynamic symbol table. */
#if defined(__GNUC__)
#define KERNEL_PRIVATE __attribute__((visibility("hidden")))
#else
#define KERNEL_PRIVATE
#endif

/* --- reading bytes (inline: every hot loop calls these per record) ------------------------- */

static inline uint64_t u64_at(const uint8_t *p) {
    uint64_t v;
    memcpy(&v, p, 8);
    return v;
}

static inline uint32_t u32_at(const uint8_t *p) {
    uint32_t v;
    memcpy(&v, p, 4);
    return v;
}

/* --- arguments: buffers from Python (_kernel.c) -------------------------------------------- */

/* A buffer argument and the view that pins it until PyBuffer_Release(&view). */
typedef struct {
    Py_buffer view;
    const uint8_t *data;
    Py_ssize_t len;
} Bytes;

KERNEL_PRIVATE int kernel_get_bytes(PyObject *obj, Bytes *out, int writable);
KERNEL_PRIVATE int kernel_get_i64(PyObject *obj, Bytes *out, Py_ssize_t *count);
KERNEL_PRIVATE int kernel_check_records(const Bytes *starts, const Bytes *lengths, Py_ssize_t n,
                                        Py_ssize_t buflen);

/* Item i of an int64 array that kernel_get_i64 took. */
static inline int64_t i64_item(const Bytes *b, Py_ssize_t i) {
    int64_t v;
    memcpy(&v, b->data + 8 * i, 8);
    return v;
}

/* --- CRC-32C (_kernel_crc.c) --------------------------------------------------------------- */

/* Fills the tables and picks SSE4.2 where the CPU has it: once, before any CRC. */
KERNEL_PRIVATE void kernel_crc_init(void);
/* TFRecord's masked CRC-32C of n bytes. */
KERNEL_PRIVATE uint32_t kernel_masked_crc(const uint8_t *p, size_t n);

/* --- the module's functions, one file each group (the method table is in _kernel.c) -------- */

/* _kernel_framing.c */
KERNEL_PRIVATE PyObject *kernel_chain(PyObject *self, PyObject *args);
KERNEL_PRIVATE PyObject *kernel_crc_ok(PyObject *self, PyObject *args);
KERNEL_PRIVATE PyObject *kernel_records(PyObject *self, PyObject *args);
KERNEL_PRIVATE PyObject *kernel_tiles(PyObject *self, PyObject *args);
/* _kernel_scalars.c */
KERNEL_PRIVATE PyObject *kernel_scalars(PyObject *self, PyObject *args);
/* _kernel_columns.c */
KERNEL_PRIVATE PyObject *kernel_by_tag(PyObject *self, PyObject *args);
KERNEL_PRIVATE PyObject *kernel_split(PyObject *self, PyObject *args);
KERNEL_PRIVATE PyObject *kernel_stats(PyObject *self, PyObject *args);
/* _kernel_hparams.c */
KERNEL_PRIVATE PyObject *kernel_hparams_event(PyObject *self, PyObject *args);

#endif
