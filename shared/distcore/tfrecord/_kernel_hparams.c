/* hparams_event: record.decode_event for the hparams plugin's usual record, in one call.
 *
 * A cursor walks the one layout TensorBoard's writers give a session start; anything else
 * returns None and record.py decodes it the general way, so this adds no second reading.
 */
#include "_kernel.h"

/* The one-byte keys of the record's fields, in this order (record.py passes them from
 * wire.py), and the plugin's name. */
enum {
    H_WALL, H_STEP, H_SUMMARY, H_VALUE, H_TAG, H_TENSOR, H_METADATA, H_PLUGIN_DATA,
    H_PLUGIN_NAME, H_CONTENT, H_VERSION, H_START, H_HPARAMS, H_KEY, H_VAL, H_NUMBER, H_STRING,
    H_BOOL, N_HKEYS
};

typedef struct {
    const uint8_t *p;
    Py_ssize_t pos, end; /* the message being read ends at `end` */
} Cur;

/* wire.read_varint inside the message: at most ten bytes; *wide: bits past the 64th. */
static int cur_varint(Cur *c, uint64_t *value, int *wide) {
    uint64_t v = 0;
    *wide = 0;
    for (int shift = 0; shift <= 63; shift += 7) {
        if (c->pos >= c->end) return -1;
        uint8_t b = c->p[c->pos++];
        v |= (uint64_t)(b & 0x7F) << shift;
        if (shift == 63 && (b & 0x7E)) *wide = 1;
        if (b < 0x80) {
            *value = v;
            return 0;
        }
    }
    return -1;
}

/* Whether the next byte is `key` (then it is consumed). */
static int cur_key(Cur *c, uint8_t key) {
    if (c->pos < c->end && c->p[c->pos] == key) {
        c->pos++;
        return 1;
    }
    return 0;
}

/* A length-delimited payload that fits the message: *inner reads it, c moves past it. */
static int cur_len(Cur *c, Cur *inner) {
    uint64_t n;
    int wide;
    if (cur_varint(c, &n, &wide) < 0 || wide || n > (uint64_t)(c->end - c->pos)) return -1;
    inner->p = c->p;
    inner->pos = c->pos;
    inner->end = c->pos + (Py_ssize_t)n;
    c->pos = inner->end;
    return 0;
}

static int cur_field(Cur *c, uint8_t key, Cur *inner) {
    return cur_key(c, key) && cur_len(c, inner) == 0;
}

static PyObject *cur_str(const Cur *c) {
    return PyUnicode_DecodeUTF8((const char *)c->p + c->pos, c->end - c->pos, "surrogateescape");
}

/* record._hparam_value for a Value of exactly one number, string or bool; NULL without an
 * error set: not that shape. */
static PyObject *hparam_value(const uint8_t *k, Cur v) {
    uint64_t raw;
    int wide;
    Cur inner;
    PyObject *out = NULL;
    if (cur_key(&v, k[H_NUMBER])) {
        if (v.end - v.pos < 8) return NULL;
        double d;
        memcpy(&d, v.p + v.pos, 8);
        v.pos += 8;
        out = PyFloat_FromDouble(d);
    } else if (cur_field(&v, k[H_STRING], &inner)) {
        out = cur_str(&inner);
    } else if (cur_key(&v, k[H_BOOL])) {
        if (cur_varint(&v, &raw, &wide) < 0) return NULL;
        out = PyBool_FromLong(raw != 0); /* as_int64 keeps the low 64 bits */
    } else {
        return NULL;
    }
    if (out != NULL && v.pos != v.end) Py_CLEAR(out); /* more than one field: not this shape */
    return out;
}

/* session_hparams for content = [version] session_start_info{entry{key, value}*}; -1 with an
 * error set, 0: not that shape, 1: *out is the dict. */
static int start_hparams(const uint8_t *k, Cur c, PyObject **out) {
    uint64_t raw;
    int wide;
    Cur start, entry, key, value;
    if (cur_key(&c, k[H_VERSION]) && (cur_varint(&c, &raw, &wide) < 0 || wide)) return 0;
    if (!cur_field(&c, k[H_START], &start) || c.pos != c.end) return 0;
    PyObject *result = PyDict_New();
    if (result == NULL) return -1;
    while (start.pos < start.end) {
        if (!cur_field(&start, k[H_HPARAMS], &entry) || !cur_field(&entry, k[H_KEY], &key) ||
            !cur_field(&entry, k[H_VAL], &value) || entry.pos != entry.end)
            goto not_this;
        PyObject *name = cur_str(&key);
        if (name == NULL) goto fail;
        PyObject *item = hparam_value(k, value);
        if (item == NULL) {
            Py_DECREF(name);
            if (PyErr_Occurred()) goto fail;
            goto not_this;
        }
        int bad = PyDict_SetItem(result, name, item);
        Py_DECREF(name);
        Py_DECREF(item);
        if (bad < 0) goto fail;
    }
    *out = result;
    return 1;
not_this:
    Py_DECREF(result);
    return 0;
fail:
    Py_DECREF(result);
    return -1;
}

/* Whether the event is exactly [wall_time] [step] summary{value{tag, [tensor],
 * metadata{plugin_data{`plugin`, content}}}} with content not empty: then 1, and *wall,
 * *step, *tag and *content read from it; else 0. Reads only, sets no error. */
static int event_layout(const uint8_t *k, const Bytes *b, const Bytes *plugin, double *wall,
                        uint64_t *step, Cur *tag, Cur *content) {
    Cur c = {b->data, 0, b->len}, summary, value, skipped, meta, data, name;
    int wide;
    if (cur_key(&c, k[H_WALL])) {
        if (c.end - c.pos < 8) return 0;
        memcpy(wall, c.p + c.pos, 8);
        c.pos += 8;
    }
    if (cur_key(&c, k[H_STEP]) && cur_varint(&c, step, &wide) < 0) return 0;
    if (!cur_field(&c, k[H_SUMMARY], &summary) || c.pos != c.end) return 0;
    if (!cur_field(&summary, k[H_VALUE], &value) || summary.pos != summary.end) return 0;
    if (!cur_field(&value, k[H_TAG], tag)) return 0;
    if (value.pos < value.end && value.p[value.pos] == k[H_TENSOR] &&
        !cur_field(&value, k[H_TENSOR], &skipped))
        return 0;
    if (!cur_field(&value, k[H_METADATA], &meta) || value.pos != value.end) return 0;
    if (!cur_field(&meta, k[H_PLUGIN_DATA], &data) || meta.pos != meta.end) return 0;
    if (!cur_field(&data, k[H_PLUGIN_NAME], &name) || !cur_field(&data, k[H_CONTENT], content) ||
        data.pos != data.end)
        return 0;
    return name.end - name.pos == plugin->len &&
           memcmp(name.p + name.pos, plugin->data, (size_t)plugin->len) == 0 &&
           content->pos != content->end;
}

/* hparams_event(data, keys, plugin) -> (wall_time, step, tag, hparams) for an event of
 * event_layout's shape whose content is a session start of plain values; None for anything
 * else (record.py then decodes it: every record accepted here is one it decodes to the same). */
PyObject *kernel_hparams_event(PyObject *self, PyObject *args) {
    PyObject *obj, *keys_obj, *plugin_obj;
    if (!PyArg_ParseTuple(args, "OOO", &obj, &keys_obj, &plugin_obj)) return NULL;
    Bytes b, keys, plugin;
    if (kernel_get_bytes(obj, &b, 0) < 0) return NULL;
    if (kernel_get_bytes(keys_obj, &keys, 0) < 0) {
        PyBuffer_Release(&b.view);
        return NULL;
    }
    if (kernel_get_bytes(plugin_obj, &plugin, 0) < 0) {
        PyBuffer_Release(&keys.view);
        PyBuffer_Release(&b.view);
        return NULL;
    }
    PyObject *result = NULL, *tag = NULL, *hparams = NULL;
    Cur tag_bytes, content;
    double wall = 0.0;
    uint64_t step = 0;
    if (keys.len != N_HKEYS) {
        PyErr_SetString(PyExc_ValueError, "bad keys for hparams_event()");
        goto done;
    }
    if (!event_layout(keys.data, &b, &plugin, &wall, &step, &tag_bytes, &content)) goto not_this;
    int found = start_hparams(keys.data, content, &hparams);
    if (found < 0) goto done;
    if (found == 0) goto not_this;
    if ((tag = cur_str(&tag_bytes)) == NULL) goto done;
    result = Py_BuildValue("(dLOO)", wall, (long long)(int64_t)step, tag, hparams);
    goto done;
not_this:
    Py_INCREF(Py_None);
    result = Py_None;
done:
    Py_XDECREF(tag);
    Py_XDECREF(hparams);
    PyBuffer_Release(&plugin.view);
    PyBuffer_Release(&keys.view);
    PyBuffer_Release(&b.view);
    return result;
}
