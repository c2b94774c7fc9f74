/* fields: wire.fields, the protobuf wire walker for the records the fast paths leave.
 *
 * It keeps wire.py's checks in its order, and words its first error as wire.py does, so the
 * two accept the same messages and report them alike.
 */
#include "_kernel.h"

/* Wire types, as schema.WIRE_*: the protobuf encoding's own numbers. */
enum { W_VARINT = 0, W_FIXED64 = 1, W_LEN = 2, W_START = 3, W_END = 4, W_FIXED32 = 5 };
#define MAX_DEPTH 100

typedef struct {
    const uint8_t *data;
    Py_ssize_t len;
    const char *error; /* the first error, as wire.py words it */
} Walk;

/* wire.read_varint: up to ten bytes (shift <= 63), the value as wide as they make it. */
static int read_varint(Walk *w, Py_ssize_t *pos, unsigned __int128 *value) {
    unsigned __int128 result = 0;
    for (int shift = 0;; shift += 7) {
        if (*pos >= w->len || shift > 63) {
            w->error = "truncated or overlong varint";
            return -1;
        }
        uint8_t byte = w->data[(*pos)++];
        result |= (unsigned __int128)(byte & 0x7F) << shift;
        if (byte < 0x80) {
            *value = result;
            return 0;
        }
    }
}

static int read_key(Walk *w, Py_ssize_t *pos, uint64_t *number, int *wire_type) {
    unsigned __int128 key;
    if (read_varint(w, pos, &key) < 0) return -1;
    *number = (uint64_t)(key >> 3);
    *wire_type = (int)(key & 7);
    if (*number == 0 || key > 0xFFFFFFFFu) {
        w->error = "invalid field number";
        return -1;
    }
    return 0;
}

static int skip_value(Walk *w, Py_ssize_t *pos, uint64_t number, int wire_type, int depth);

/* wire._skip_group: past the END_GROUP key that closes group `number`. */
static int skip_group(Walk *w, Py_ssize_t *pos, uint64_t number, int depth) {
    if (depth > MAX_DEPTH) {
        w->error = "groups nested too deeply";
        return -1;
    }
    for (;;) {
        if (*pos >= w->len) {
            w->error = "unterminated group";
            return -1;
        }
        uint64_t inner;
        int wire_type;
        if (read_key(w, pos, &inner, &wire_type) < 0) return -1;
        if (wire_type == W_END) {
            if (inner != number) {
                w->error = "mismatched end of group";
                return -1;
            }
            return 0;
        }
        if (skip_value(w, pos, inner, wire_type, depth + 1) < 0) return -1;
    }
}

/* wire._skip_value: *pos moves past the value; a varint's value is not kept. */
static int skip_value(Walk *w, Py_ssize_t *pos, uint64_t number, int wire_type, int depth) {
    unsigned __int128 size;
    if (wire_type == W_VARINT) return read_varint(w, pos, &size);
    if (wire_type == W_LEN) {
        if (read_varint(w, pos, &size) < 0) return -1;
    } else if (wire_type == W_FIXED64 || wire_type == W_FIXED32) {
        size = wire_type == W_FIXED64 ? 8 : 4;
    } else if (wire_type == W_START) {
        return skip_group(w, pos, number, depth);
    } else {
        w->error = "invalid wire type";
        return -1;
    }
    if (size > (unsigned __int128)(w->len - *pos)) {
        w->error = "field runs past the end of the message";
        return -1;
    }
    *pos += (Py_ssize_t)size;
    return 0;
}

static PyObject *py_varint(unsigned __int128 value) {
    uint64_t high = (uint64_t)(value >> 64), low = (uint64_t)value;
    if (high == 0) return PyLong_FromUnsignedLongLong(low);
    PyObject *h = PyLong_FromUnsignedLongLong(high), *l = PyLong_FromUnsignedLongLong(low);
    PyObject *shift = PyLong_FromLong(64), *shifted = NULL, *out = NULL;
    if (h && l && shift && (shifted = PyNumber_Lshift(h, shift))) out = PyNumber_Or(shifted, l);
    Py_XDECREF(h);
    Py_XDECREF(l);
    Py_XDECREF(shift);
    Py_XDECREF(shifted);
    return out;
}

/* Whether `wire_type` is one the field may take (wire.fields' `expected`); -1 on error. */
static int allowed(PyObject *expected, uint64_t number, int wire_type) {
    if (expected == Py_None) return 1;
    PyObject *key = PyLong_FromUnsignedLongLong(number);
    if (key == NULL) return -1;
    PyObject *types = PyDict_GetItemWithError(expected, key); /* borrowed */
    Py_DECREF(key);
    if (types == NULL) {
        if (PyErr_Occurred()) return -1;
        return wire_type != W_END && wire_type < 6; /* wire._ANY */
    }
    PyObject *wt = PyLong_FromLong(wire_type);
    if (wt == NULL) return -1;
    int found = PySequence_Contains(types, wt);
    Py_DECREF(wt);
    return found;
}

PyObject *kernel_fields(PyObject *self, PyObject *args) {
    PyObject *obj, *expected;
    if (!PyArg_ParseTuple(args, "OO", &obj, &expected)) return NULL;
    if (expected != Py_None && !PyDict_Check(expected)) {
        PyErr_SetString(PyExc_TypeError, "expected must be a dict or None");
        return NULL;
    }
    Bytes b;
    if (kernel_get_bytes(obj, &b, 0) < 0) return NULL;
    Walk w = {b.data, b.len, NULL};
    PyObject *found = PyList_New(0), *item = NULL;
    Py_ssize_t pos = 0;
    while (found != NULL && pos < w.len) {
        uint64_t number;
        int wire_type;
        if (read_key(&w, &pos, &number, &wire_type) < 0) break;
        int ok = allowed(expected, number, wire_type);
        if (ok < 0) goto fail;
        if (!ok) {
            w.error = "field in a wire type its type never takes";
            break;
        }
        PyObject *value;
        if (wire_type == W_VARINT) {
            unsigned __int128 v;
            if (read_varint(&w, &pos, &v) < 0) break;
            value = py_varint(v);
        } else {
            Py_ssize_t start = pos;
            if (wire_type == W_LEN) {
                unsigned __int128 size;
                Py_ssize_t at = pos;
                if (read_varint(&w, &at, &size) < 0) break;
                start = at;
            }
            if (skip_value(&w, &pos, number, wire_type, 0) < 0) break;
            value = PyBytes_FromStringAndSize((const char *)w.data + start, pos - start);
        }
        if (value == NULL) goto fail;
        item = Py_BuildValue("(KiN)", (unsigned long long)number, wire_type, value);
        if (item == NULL || PyList_Append(found, item) < 0) goto fail;
        Py_CLEAR(item);
    }
    PyBuffer_Release(&b.view);
    if (found == NULL) return NULL;
    return Py_BuildValue("(Ns)", found, w.error);
fail:
    Py_XDECREF(item);
    Py_XDECREF(found);
    PyBuffer_Release(&b.view);
    return NULL;
}

