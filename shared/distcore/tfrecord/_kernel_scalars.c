/* scalars: batch.decode_scalars, the one-scalar events of a file decoded in one pass.
 *
 * The whole fast path (the event's fixed layout, the value, the tag interning) is in this one
 * file so that the compiler inlines it into the loop as it did when the kernel was one file.
 */
#include "_kernel.h"

/* The schema's one-byte keys, in this order (batch.py passes them from wire.py). */
enum { K_WALL, K_STEP, K_SUMMARY, K_VALUE, K_TAG, K_SIMPLE, K_TENSOR, K_METADATA, N_KEYS };

typedef struct {
    const uint8_t *buf;
    int64_t limit; /* len(buf) - PAD: where positions are clamped */
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

/* field_len: (length clamped to limit, offset of the payload). */
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

/* value_of: the value after the tag. Returns whether the record is a scalar. */
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

/* batch.decode_scalars for one record: whether it is an event with one scalar only. */
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

/* Room for n distinct tags, the table at most half full. */
static int tags_init(Tags *t, Py_ssize_t n) {
    size_t cap = 16;
    while (cap < 2 * (size_t)n) cap *= 2;
    t->mask = cap - 1;
    for (int r = 0; r < RECENT; r++) t->recent[r] = -1;
    t->slot = PyMem_Calloc(cap, sizeof(int64_t));
    t->first_start = PyMem_Malloc((n + 1) * sizeof(int64_t));
    t->first_len = PyMem_Malloc((n + 1) * sizeof(int64_t));
    if (!t->slot || !t->first_start || !t->first_len) {
        PyErr_NoMemory();
        return -1;
    }
    return 0;
}

static void tags_free(Tags *t) {
    PyMem_Free(t->slot);
    PyMem_Free(t->first_start);
    PyMem_Free(t->first_len);
}

/* The interned tags' names, by id. */
static PyObject *tag_names(const Tags *t, const uint8_t *buf) {
    PyObject *tags = PyList_New(t->count);
    if (tags == NULL) return NULL;
    for (int64_t id = 0; id < t->count; id++) {
        PyObject *name = PyUnicode_DecodeUTF8((const char *)buf + t->first_start[id],
                                              t->first_len[id], "surrogateescape");
        if (name == NULL) {
            Py_DECREF(tags);
            return NULL;
        }
        PyList_SetItem(tags, id, name);
    }
    return tags;
}

/* --- the call -------------------------------------------------------------------------------- */

/* scalars' buffer arguments, in the order they are taken. */
enum { A_BUF, A_STARTS, A_LENGTHS, A_KEYS, A_F32, A_F64, A_MD, N_ARGS };
/* Its output columns: index tag step wall value (8 bytes a row), tensor md (1 byte). */
enum { N_COLS = 7 };
static const Py_ssize_t widths[N_COLS] = {8, 8, 8, 8, 8, 1, 1};

/* Takes the views (*got of them held, to release, whatever happens) and checks them. */
static int scalars_open(PyObject *args, Bytes v[N_ARGS], int *got, Py_ssize_t *n,
                        long long *max_tag) {
    PyObject *o[N_ARGS];
    Py_ssize_t n2;
    if (!PyArg_ParseTuple(args, "OOOOOOOL", &o[0], &o[1], &o[2], &o[3], &o[4], &o[5], &o[6],
                          max_tag))
        return -1;
    for (*got = 0; *got < N_ARGS; (*got)++) {
        int a = *got, taken = a == A_STARTS    ? kernel_get_i64(o[a], &v[a], n)
                              : a == A_LENGTHS ? kernel_get_i64(o[a], &v[a], &n2)
                                               : kernel_get_bytes(o[a], &v[a], 0);
        if (taken < 0) return -1;
    }
    if (*n != n2 || v[A_KEYS].len != N_KEYS || v[A_F32].len > 8 || v[A_F64].len > 8 ||
        v[A_MD].len > 15 || v[A_BUF].len < PAD) {
        PyErr_SetString(PyExc_ValueError, "bad arguments to scalars()");
        return -1;
    }
    return kernel_check_records(&v[A_STARTS], &v[A_LENGTHS], *n, v[A_BUF].len);
}

/* The fast path over every record, into rows of `out`: plain memory only, so it runs without
 * the GIL. Returns the number of rows (the records that are one scalar). */
static Py_ssize_t scalars_loop(const Bytes v[N_ARGS], Py_ssize_t n, long long max_tag, Tags *t,
                               char *out[N_COLS]) {
    Buf buf = {v[A_BUF].data, (int64_t)v[A_BUF].len - PAD};
    Schema sc = {v[A_KEYS].data, &v[A_F32], &v[A_F64], &v[A_MD], max_tag};
    Py_ssize_t m = 0;
    Py_BEGIN_ALLOW_THREADS /* the views pin the buffers; the bytearrays are made */
    for (Py_ssize_t i = 0; i < n; i++) {
        int64_t s = i64_item(&v[A_STARTS], i), e = s + i64_item(&v[A_LENGTHS], i);
        Scalar r;
        if (!scalar_of(&buf, &sc, s, e, &r)) continue;
        int64_t index = i, tag = intern(t, buf.buf, r.tag_start, r.tag_len);
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
    return m;
}

/* scalars(buf, starts, lengths, keys, f32, f64, md, max_tag) -> (index, tag ids, tags, steps,
 * walls, values, is_tensor, has_md): batch.decode_scalars' columns, one row a scalar. */
PyObject *kernel_scalars(PyObject *self, PyObject *args) {
    Bytes v[N_ARGS];
    Py_ssize_t n;
    long long max_tag;
    int got = 0; /* how many views to release */
    PyObject *result = NULL, *arrays[N_COLS] = {NULL}, *tags = NULL;
    Tags t = {0};
    if (scalars_open(args, v, &got, &n, &max_tag) < 0) goto done;
    for (int a = 0; a < N_COLS; a++)
        if ((arrays[a] = PyByteArray_FromStringAndSize(NULL, n * widths[a])) == NULL) goto done;
    if (tags_init(&t, n) < 0) goto done;
    char *out[N_COLS];
    for (int a = 0; a < N_COLS; a++) out[a] = PyByteArray_AsString(arrays[a]);
    Py_ssize_t m = scalars_loop(v, n, max_tag, &t, out);
    for (int a = 0; a < N_COLS; a++)
        if (PyByteArray_Resize(arrays[a], m * widths[a]) < 0) goto done;
    if ((tags = tag_names(&t, v[A_BUF].data)) == NULL) goto done;
    result = Py_BuildValue("(OOOOOOOO)", arrays[0], arrays[1], tags, arrays[2], arrays[3],
                           arrays[4], arrays[5], arrays[6]);
done:
    tags_free(&t);
    Py_XDECREF(tags);
    for (int a = 0; a < N_COLS; a++) Py_XDECREF(arrays[a]);
    for (int a = 0; a < got; a++) PyBuffer_Release(&v[a].view);
    return result;
}
