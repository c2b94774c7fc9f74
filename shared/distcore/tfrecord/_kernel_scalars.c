/* scalars: fastpath.decode_scalars, the one-scalar events of a file decoded in one pass.
 *
 * The whole fast path (the event's fixed layout, the value, the tag interning) is in this one
 * file so that the compiler inlines it into the loop as it did when the kernel was one file.
 */
#include "_kernel.h"

/* The schema's one-byte keys, in this order (fastpath.py passes them from fields.py). */
enum { K_WALL, K_STEP, K_SUMMARY, K_VALUE, K_TAG, K_SIMPLE, K_TENSOR, K_METADATA, N_KEYS };

typedef struct {
    const uint8_t *buf;
    int64_t limit; /* len(buf) - PAD: where positions are clamped, as in the numpy code */
} Buf;

static int64_t clampi(int64_t pos, int64_t limit) { return pos < limit ? pos : limit; }

/* buffers.varints: (value, byte length), length 0 when no byte of ten ends it. */
static uint64_t varint(const Buf *b, int64_t pos, int64_t *width) {
    const uint8_t *p = b->buf + clampi(pos, b->limit);
    uint64_t value = p[0] & 0x7F;
    *width = 1;
    if (p[0] < 0x80) return value;
    *width = 0;
    for (int j = 1; j < 10; j++) {
        value |= (uint64_t)(p[j] & 0x7F) << (7 * j);
        if (p[j] < 0x80) {
            *width = j + 1;
            break;
        }
    }
    return value;
}

/* fastpath._field_len: (length clamped to limit, offset of the payload). */
static int64_t field_len(const Buf *b, int64_t pos, int64_t *payload) {
    int64_t width;
    uint64_t value = varint(b, pos + 1, &width);
    *payload = pos + 1 + width;
    return value < (uint64_t)b->limit ? (int64_t)value : b->limit;
}

static int equals(const Buf *b, int64_t pos, const Bytes *pattern) {
    return memcmp(b->buf + pos, pattern->data, (size_t)pattern->len) == 0;
}

static float f32_at(const uint8_t *p) {
    float v;
    memcpy(&v, p, 4);
    return v;
}

static double f64_at(const uint8_t *p) {
    double v;
    memcpy(&v, p, 8);
    return v;
}

typedef struct {
    const uint8_t *keys;
    const Bytes *f32, *f64, *md;
    int64_t max_tag;
} Schema;

typedef struct {
    int64_t step, tag_start, tag_len;
    double wall, value;
    char is_tensor, has_md;
} Scalar;

/* fastpath._value: the value after the tag. Returns whether the record is a scalar. */
static int value_of(const Buf *b, const Schema *sc, int64_t pos, int64_t end, Scalar *out) {
    const uint8_t *k = sc->keys;
    uint8_t kind = b->buf[pos];
    int simple = kind == k[K_SIMPLE] && pos + 5 == end;
    if (simple) { /* what the rest would find for it: no tensor, no metadata (pos + 5 <= limit) */
        out->value = (double)f32_at(b->buf + pos + 1);
        out->is_tensor = 0;
        out->has_md = 0;
        return 1;
    }
    int tensor = kind == k[K_TENSOR];
    int64_t body;
    int64_t size = field_len(b, pos, &body);
    body = clampi(body, b->limit);
    int f32 = tensor && size == sc->f32->len + 4 && equals(b, body, sc->f32);
    int f64 = tensor && size == sc->f64->len + 8 && equals(b, body, sc->f64);
    int64_t after = clampi(body + size, b->limit);
    int no_md = after == end;
    int64_t md_body;
    int64_t md_size = field_len(b, after, &md_body);
    int has_md = (f32 || f64) && b->buf[after] == k[K_METADATA] && md_body + md_size == end &&
                 md_size == sc->md->len && equals(b, clampi(md_body, b->limit), sc->md);
    int tensor_ok = (f32 || f64) && (no_md || has_md);
    out->value = (double)f32_at(b->buf + clampi(pos + 1, b->limit));
    if (f32) out->value = (double)f32_at(b->buf + body + sc->f32->len);
    if (f64) out->value = f64_at(b->buf + body + sc->f64->len);
    out->is_tensor = (char)tensor_ok;
    out->has_md = (char)has_md;
    return simple || tensor_ok;
}

/* fastpath.decode_scalars for one record: whether it is an event with one scalar only. */
static int scalar_of(const Buf *b, const Schema *sc, int64_t start, int64_t end, Scalar *out) {
    const uint8_t *k = sc->keys;
    const uint8_t *buf = b->buf;
    int64_t width, size;
    if (buf[start] != k[K_WALL]) return 0;
    out->wall = f64_at(buf + start + 1);
    int64_t pos = start + 9;
    int has_step = buf[pos] == k[K_STEP];
    uint64_t step = varint(b, pos + 1, &width);
    out->step = has_step ? (int64_t)step : 0;
    if (has_step && width == 0) return 0;
    pos = clampi(pos + (has_step ? 1 + width : 0), b->limit);
    if (buf[pos] != k[K_SUMMARY]) return 0;
    size = field_len(b, pos, &pos);
    if (pos + size != end) return 0;
    pos = clampi(pos, b->limit);
    if (buf[pos] != k[K_VALUE]) return 0;
    size = field_len(b, pos, &pos);
    if (pos + size != end) return 0;
    pos = clampi(pos, b->limit);
    if (buf[pos] != k[K_TAG]) return 0;
    out->tag_len = field_len(b, pos, &out->tag_start);
    if (out->tag_len > sc->max_tag || out->tag_start + out->tag_len >= end) return 0;
    return value_of(b, sc, clampi(out->tag_start + out->tag_len, b->limit), end, out);
}

/* Exact interning of tag bytes: open addressing over (start, length) of each first use. */
#define RECENT 4

typedef struct {
    int64_t *slot; /* id + 1, 0 when empty */
    int64_t *first_start, *first_len;
    size_t mask;
    int64_t count;
    int64_t recent[RECENT]; /* ids found last, -1 for none yet */
    unsigned next;
} Tags;

static int64_t lookup(Tags *t, const uint8_t *buf, int64_t start, int64_t len);

static uint64_t hash_bytes(const uint8_t *p, int64_t n) {
    uint64_t h = 1469598103934665603ull;
    for (int64_t i = 0; i < n; i++) h = (h ^ p[i]) * 1099511628211ull;
    return h;
}

static int64_t intern(Tags *t, const uint8_t *buf, int64_t start, int64_t len) {
    /* A writer's tags come round in turn: the last few ids are tried before hashing. */
    for (int r = 0; r < RECENT; r++) {
        int64_t id = t->recent[r];
        if (id >= 0 && t->first_len[id] == len &&
            memcmp(buf + t->first_start[id], buf + start, len) == 0)
            return id;
    }
    int64_t id = lookup(t, buf, start, len);
    t->recent[t->next++ % RECENT] = id;
    return id;
}

static int64_t lookup(Tags *t, const uint8_t *buf, int64_t start, int64_t len) {
    size_t i = hash_bytes(buf + start, len) & t->mask;
    for (;; i = (i + 1) & t->mask) {
        int64_t id = t->slot[i] - 1;
        if (id < 0) {
            t->first_start[t->count] = start;
            t->first_len[t->count] = len;
            t->slot[i] = ++t->count;
            return t->count - 1;
        }
        if (t->first_len[id] == len && memcmp(buf + t->first_start[id], buf + start, len) == 0)
            return id;
    }
}

static PyObject *new_array(Py_ssize_t bytes) { return PyByteArray_FromStringAndSize(NULL, bytes); }

PyObject *kernel_scalars(PyObject *self, PyObject *args) {
    PyObject *obj, *s_obj, *l_obj, *keys_obj, *f32_obj, *f64_obj, *md_obj;
    long long max_tag;
    if (!PyArg_ParseTuple(args, "OOOOOOOL", &obj, &s_obj, &l_obj, &keys_obj, &f32_obj,
                          &f64_obj, &md_obj, &max_tag))
        return NULL;
    Bytes b, starts, lengths, keys, f32, f64, md;
    Py_ssize_t n, n2;
    int got = 0; /* how many views to release */
    PyObject *result = NULL, *arrays[7] = {NULL}, *tags = NULL;
    Tags t = {0};
    if (kernel_get_bytes(obj, &b, 0) < 0) goto done;
    got = 1;
    if (kernel_get_i64(s_obj, &starts, &n) < 0) goto done;
    got = 2;
    if (kernel_get_i64(l_obj, &lengths, &n2) < 0) goto done;
    got = 3;
    if (kernel_get_bytes(keys_obj, &keys, 0) < 0) goto done;
    got = 4;
    if (kernel_get_bytes(f32_obj, &f32, 0) < 0) goto done;
    got = 5;
    if (kernel_get_bytes(f64_obj, &f64, 0) < 0) goto done;
    got = 6;
    if (kernel_get_bytes(md_obj, &md, 0) < 0) goto done;
    got = 7;
    if (n != n2 || keys.len != N_KEYS || f32.len > 8 || f64.len > 8 || md.len > 15 ||
        b.len < PAD) {
        PyErr_SetString(PyExc_ValueError, "bad arguments to scalars()");
        goto done;
    }
    if (kernel_check_records(&starts, &lengths, n, b.len) < 0) goto done;
    Buf buf = {b.data, (int64_t)b.len - PAD};
    Schema sc = {keys.data, &f32, &f64, &md, max_tag};
    Py_ssize_t widths[7] = {8, 8, 8, 8, 8, 1, 1}; /* index tag step wall value tensor md */
    for (int a = 0; a < 7; a++)
        if ((arrays[a] = new_array(n * widths[a])) == NULL) goto done;
    size_t cap = 16;
    while (cap < 2 * (size_t)n) cap *= 2;
    t.mask = cap - 1;
    for (int r = 0; r < RECENT; r++) t.recent[r] = -1;
    t.slot = PyMem_Calloc(cap, sizeof(int64_t));
    t.first_start = PyMem_Malloc((n + 1) * sizeof(int64_t));
    t.first_len = PyMem_Malloc((n + 1) * sizeof(int64_t));
    if (!t.slot || !t.first_start || !t.first_len) {
        PyErr_NoMemory();
        goto done;
    }
    char *out[7];
    for (int a = 0; a < 7; a++) out[a] = PyByteArray_AS_STRING(arrays[a]);
    Py_ssize_t m = 0;
    Py_BEGIN_ALLOW_THREADS /* plain memory only until the loop ends */
    for (Py_ssize_t i = 0; i < n; i++) {
        int64_t s = i64_item(&starts, i), e = s + i64_item(&lengths, i);
        Scalar r;
        if (!scalar_of(&buf, &sc, s, e, &r)) continue;
        int64_t index = i, tag = intern(&t, b.data, r.tag_start, r.tag_len);
        memcpy(out[0] + 8 * m, &index, 8);
        memcpy(out[1] + 8 * m, &tag, 8);
        memcpy(out[2] + 8 * m, &r.step, 8);
        memcpy(out[3] + 8 * m, &r.wall, 8);
        memcpy(out[4] + 8 * m, &r.value, 8);
        out[5][m] = r.is_tensor;
        out[6][m] = r.has_md;
        m++;
    }
    Py_END_ALLOW_THREADS
    for (int a = 0; a < 7; a++)
        if (PyByteArray_Resize(arrays[a], m * widths[a]) < 0) goto done;
    if ((tags = PyList_New(t.count)) == NULL) goto done;
    for (int64_t id = 0; id < t.count; id++) {
        PyObject *name = PyUnicode_DecodeUTF8((const char *)b.data + t.first_start[id],
                                              t.first_len[id], "surrogateescape");
        if (name == NULL) goto done;
        PyList_SET_ITEM(tags, id, name);
    }
    result = Py_BuildValue("(OOOOOOOO)", arrays[0], arrays[1], tags, arrays[2], arrays[3],
                           arrays[4], arrays[5], arrays[6]);
done:
    PyMem_Free(t.slot);
    PyMem_Free(t.first_start);
    PyMem_Free(t.first_len);
    Py_XDECREF(tags);
    for (int a = 0; a < 7; a++) Py_XDECREF(arrays[a]);
    Bytes *views[7] = {&b, &starts, &lengths, &keys, &f32, &f64, &md};
    for (int v = 0; v < got; v++) PyBuffer_Release(&views[v]->view);
    return result;
}

