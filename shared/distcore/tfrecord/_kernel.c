/* distcore.tfrecord._kernel: the decoder's hot loops, one record at a time in C.
 *
 * An optional extension (setup.py): where it does not build, framing.py, crc.py and
 * fastpath.py do the same work with numpy, and the tests check both give the same batches.
 * Each function here is a transcription of its numpy twin, check for check, so the two accept
 * exactly the same records:
 *   chain(buf, pos, size)           framing._chain with the header CRCs checked on the way
 *   crc_ok(buf, starts, lengths)    crc.crc_ok: masked CRC-32C of each record's data
 *   records(buf, heads)             framing._check_data: the records whose data CRC holds
 *   scalars(buf, starts, lengths, keys, f32, f64, md, max_tag)
 *                                   fastpath.decode_scalars, the tags interned exactly
 *   fields(data, expected)          wire.fields: the fields before the first error, and it
 *   by_tag(tag_ids, n, steps, walls, values)
 *                                   batch._by_tag's stable argsort by tag, as a counting sort
 *   split(tag_ids, n, bounds, steps, walls, values)
 *                                   by_tag for each file of a group (tfrecord/plain.py)
 *   stats(steps, values)            series._increasing, _fmin and _fmax of a first read
 *   tiles(starts, lengths, end, trouble, bases, sizes)
 *                                   many._Edges.tiles: each file's records, and if they tile it
 *   hparams_event(data, keys, plugin)
 *                                   record.decode_event of the hparams plugin's usual record
 * `buf` is any buffer (a bytearray); every read stays inside it: positions are clamped to
 * len(buf) - 16 as the numpy code clamps them, and reads go at most 15 bytes past that.
 * Arrays go in and out as bytes-like objects of native int64/float64/bool; the Python side
 * wraps them with np.frombuffer (no numpy headers needed to build).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

/* Records are little-endian and read here with memcpy: on another byte order (or a compiler
 * without these macros) the build fails, and being optional, leaves the numpy path. */
#if !defined(__BYTE_ORDER__) || __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "the kernel reads little-endian records natively"
#endif

#define HEADER 12
#define FOOTER 4
#define PAD 16
#define MAX_RECORD (256u << 20)
#define MASK_DELTA 0xA282EAD8u

/* --- CRC-32C -------------------------------------------------------------------------------- */

static uint32_t table[8][256];

static void make_tables(void) {
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++) c = (c >> 1) ^ ((c & 1) ? 0x82F63B78u : 0);
        table[0][i] = c;
    }
    for (int k = 1; k < 8; k++)
        for (int i = 0; i < 256; i++)
            table[k][i] = (table[k - 1][i] >> 8) ^ table[0][table[k - 1][i] & 0xFF];
}

static uint32_t crc_soft(const uint8_t *p, size_t n) {
    uint32_t c = 0xFFFFFFFFu;
    while (n >= 8) {
        uint64_t w;
        memcpy(&w, p, 8);
        w ^= c;
        c = table[7][w & 0xFF] ^ table[6][(w >> 8) & 0xFF] ^ table[5][(w >> 16) & 0xFF] ^
            table[4][(w >> 24) & 0xFF] ^ table[3][(w >> 32) & 0xFF] ^
            table[2][(w >> 40) & 0xFF] ^ table[1][(w >> 48) & 0xFF] ^ table[0][w >> 56];
        p += 8;
        n -= 8;
    }
    while (n--) c = table[0][(c ^ *p++) & 0xFF] ^ (c >> 8);
    return ~c;
}

#if defined(__x86_64__) && defined(__GNUC__)
__attribute__((target("sse4.2"))) static uint32_t crc_hw(const uint8_t *p, size_t n) {
    uint64_t c = 0xFFFFFFFFu;
    while (n >= 8) {
        uint64_t w;
        memcpy(&w, p, 8);
        c = __builtin_ia32_crc32di(c, w);
        p += 8;
        n -= 8;
    }
    uint32_t c32 = (uint32_t)c;
    while (n--) c32 = __builtin_ia32_crc32qi(c32, *p++);
    return ~c32;
}
#define HAVE_HW 1
#else
#define HAVE_HW 0
#endif

static int use_hw = 0;

static uint32_t masked_crc(const uint8_t *p, size_t n) {
#if HAVE_HW
    uint32_t c = use_hw ? crc_hw(p, n) : crc_soft(p, n);
#else
    uint32_t c = crc_soft(p, n);
#endif
    return ((c >> 15) | (c << 17)) + MASK_DELTA;
}

static uint64_t u64_at(const uint8_t *p) {
    uint64_t v;
    memcpy(&v, p, 8);
    return v;
}

static uint32_t u32_at(const uint8_t *p) {
    uint32_t v;
    memcpy(&v, p, 4);
    return v;
}

/* --- arguments -------------------------------------------------------------------------- */

typedef struct {
    Py_buffer view;
    const uint8_t *data;
    Py_ssize_t len;
} Bytes;

static int get_bytes(PyObject *obj, Bytes *out, int writable) {
    if (PyObject_GetBuffer(obj, &out->view, writable ? PyBUF_WRITABLE : PyBUF_SIMPLE) < 0)
        return -1;
    out->data = (const uint8_t *)out->view.buf;
    out->len = out->view.len;
    return 0;
}

/* An int64 array's bytes, as (pointer, count). */
static int get_i64(PyObject *obj, Bytes *out, Py_ssize_t *count) {
    if (get_bytes(obj, out, 0) < 0) return -1;
    if (out->len % 8) {
        PyBuffer_Release(&out->view);
        PyErr_SetString(PyExc_ValueError, "expected int64 data");
        return -1;
    }
    *count = out->len / 8;
    return 0;
}

static int64_t i64_item(const Bytes *b, Py_ssize_t i) {
    int64_t v;
    memcpy(&v, b->data + 8 * i, 8);
    return v;
}

/* The records must lie in the buffer with PAD bytes after them: the numpy code's contract. */
static int check_records(const Bytes *starts, const Bytes *lengths, Py_ssize_t n,
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

/* --- chain ------------------------------------------------------------------------------ */

static PyObject *k_chain(PyObject *self, PyObject *args) {
    PyObject *obj;
    Py_ssize_t pos, size;
    if (!PyArg_ParseTuple(args, "Onn", &obj, &pos, &size)) return NULL;
    Bytes b;
    if (get_bytes(obj, &b, 0) < 0) return NULL;
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
    char *out = PyByteArray_AS_STRING(heads);
    Py_BEGIN_ALLOW_THREADS /* the view pins the buffer: nothing can resize it */
    while (pos <= size - HEADER && count < cap) {
        uint64_t length = u64_at(b.data + pos);
        uint32_t crc = u32_at(b.data + pos + 8);
        if (length > MAX_RECORD || (length == 0 && crc == 0)) break;
        if ((uint64_t)(size - pos) < length + HEADER + FOOTER) break;
        if (masked_crc(b.data + pos, 8) != crc) break;
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

static PyObject *k_crc_ok(PyObject *self, PyObject *args) {
    PyObject *obj, *s_obj, *l_obj;
    if (!PyArg_ParseTuple(args, "OOO", &obj, &s_obj, &l_obj)) return NULL;
    Bytes b, starts, lengths;
    Py_ssize_t n, n2;
    if (get_bytes(obj, &b, 0) < 0) return NULL;
    if (get_i64(s_obj, &starts, &n) < 0) goto fail_b;
    if (get_i64(l_obj, &lengths, &n2) < 0) goto fail_s;
    PyObject *out = NULL;
    if (n != n2) {
        PyErr_SetString(PyExc_ValueError, "starts and lengths differ in length");
    } else if (check_records(&starts, &lengths, n, b.len) == 0) {
        out = PyByteArray_FromStringAndSize(NULL, n);
        if (out != NULL) {
            char *ok = PyByteArray_AS_STRING(out);
            Py_BEGIN_ALLOW_THREADS /* the views pin the buffers: nothing can resize them */
            for (Py_ssize_t i = 0; i < n; i++) {
                int64_t s = i64_item(&starts, i), l = i64_item(&lengths, i);
                ok[i] = masked_crc(b.data + s, (size_t)l) == u32_at(b.data + s + l);
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

/* records(buf, heads) -> (starts, lengths, bad heads): each record's data start and length
 * where its data CRC holds, in order, and the heads of those where it does not. */
static PyObject *k_records(PyObject *self, PyObject *args) {
    PyObject *obj, *h_obj;
    if (!PyArg_ParseTuple(args, "OO", &obj, &h_obj)) return NULL;
    Bytes b, heads;
    Py_ssize_t n;
    if (get_bytes(obj, &b, 0) < 0) return NULL;
    if (get_i64(h_obj, &heads, &n) < 0) {
        PyBuffer_Release(&b.view);
        return NULL;
    }
    PyObject *starts = NULL, *lengths = NULL, *bad = NULL, *result = NULL;
    for (Py_ssize_t i = 0; i < n; i++) {
        int64_t h = i64_item(&heads, i);
        if (h < 0 || h > (int64_t)b.len - PAD - HEADER ||
            u64_at(b.data + h) > (uint64_t)(b.len - PAD - HEADER - h)) {
            PyErr_SetString(PyExc_ValueError, "record outside the buffer");
            goto done;
        }
    }
    starts = PyByteArray_FromStringAndSize(NULL, n * 8);
    lengths = PyByteArray_FromStringAndSize(NULL, n * 8);
    bad = PyList_New(0);
    if (starts == NULL || lengths == NULL || bad == NULL) goto done;
    int64_t *s_out = (int64_t *)PyByteArray_AS_STRING(starts);
    int64_t *l_out = (int64_t *)PyByteArray_AS_STRING(lengths);
    Py_ssize_t kept = 0, wrong = 0;
    Py_BEGIN_ALLOW_THREADS /* the views pin the buffers: nothing can resize them */
    for (Py_ssize_t i = 0; i < n; i++) {
        int64_t h = i64_item(&heads, i), s = h + HEADER;
        int64_t l = (int64_t)u64_at(b.data + h);
        if (masked_crc(b.data + s, (size_t)l) == u32_at(b.data + s + l)) {
            memcpy(s_out + kept, &s, 8);
            memcpy(l_out + kept, &l, 8);
            kept++;
        } else {
            wrong++;
        }
    }
    Py_END_ALLOW_THREADS
    if (wrong) /* rare: found again, with the GIL */
        for (Py_ssize_t i = 0; i < n; i++) {
            int64_t h = i64_item(&heads, i), s = h + HEADER;
            int64_t l = (int64_t)u64_at(b.data + h);
            if (masked_crc(b.data + s, (size_t)l) != u32_at(b.data + s + l)) {
                PyObject *head = PyLong_FromLongLong(h);
                if (head == NULL || PyList_Append(bad, head) < 0) {
                    Py_XDECREF(head);
                    goto done;
                }
                Py_DECREF(head);
            }
        }
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

/* --- scalars ---------------------------------------------------------------------------- */

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

static PyObject *k_scalars(PyObject *self, PyObject *args) {
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
    if (get_bytes(obj, &b, 0) < 0) goto done;
    got = 1;
    if (get_i64(s_obj, &starts, &n) < 0) goto done;
    got = 2;
    if (get_i64(l_obj, &lengths, &n2) < 0) goto done;
    got = 3;
    if (get_bytes(keys_obj, &keys, 0) < 0) goto done;
    got = 4;
    if (get_bytes(f32_obj, &f32, 0) < 0) goto done;
    got = 5;
    if (get_bytes(f64_obj, &f64, 0) < 0) goto done;
    got = 6;
    if (get_bytes(md_obj, &md, 0) < 0) goto done;
    got = 7;
    if (n != n2 || keys.len != N_KEYS || f32.len > 8 || f64.len > 8 || md.len > 15 ||
        b.len < PAD) {
        PyErr_SetString(PyExc_ValueError, "bad arguments to scalars()");
        goto done;
    }
    if (check_records(&starts, &lengths, n, b.len) < 0) goto done;
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

/* --- fields: wire.fields, the protobuf wire walker ----------------------------------------- */

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

static PyObject *k_fields(PyObject *self, PyObject *args) {
    PyObject *obj, *expected;
    if (!PyArg_ParseTuple(args, "OO", &obj, &expected)) return NULL;
    if (expected != Py_None && !PyDict_Check(expected)) {
        PyErr_SetString(PyExc_TypeError, "expected must be a dict or None");
        return NULL;
    }
    Bytes b;
    if (get_bytes(obj, &b, 0) < 0) return NULL;
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

/* --- points by tag ---------------------------------------------------------------------- */

/* batch._by_tag: the points reordered tag by tag (stable: written order within a tag), as
 * np.argsort(tag_ids, kind="stable") orders them, in one counting pass. Returns
 * ([(tag id, first, end)] for each tag present, ascending; steps; walls; values), the columns
 * as writable bytearrays of the input's 8-byte items copied bit for bit. */
static PyObject *k_by_tag(PyObject *self, PyObject *args) {
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
    if (get_i64(o_ids, &ids, &n) < 0) return NULL;
    for (; got < 3; got++) {
        Py_ssize_t count;
        if (get_i64(o_cols[got], &cols[got], &count) < 0) goto done;
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

static PyObject *k_split(PyObject *self, PyObject *args) {
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
    if (get_i64(o_ids, &ids, &n) < 0) return NULL;
    if (get_i64(o_bounds, &bounds, &nb) < 0) {
        PyBuffer_Release(&ids.view);
        return NULL;
    }
    for (; got < 3; got++) {
        Py_ssize_t c;
        if (get_i64(o_cols[got], &cols[got], &c) < 0) goto done;
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
static PyObject *k_stats(PyObject *self, PyObject *args) {
    PyObject *o_steps, *o_values;
    if (!PyArg_ParseTuple(args, "OO", &o_steps, &o_values)) return NULL;
    Bytes steps, values;
    Py_ssize_t n, m;
    if (get_i64(o_steps, &steps, &n) < 0) return NULL;
    if (get_i64(o_values, &values, &m) < 0) {
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

/* --- tiles: many._Edges.tiles, where each file of a group lies among its records ----------- */

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
static PyObject *k_tiles(PyObject *self, PyObject *args) {
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
        if (get_i64(objs[got], &v[got], &n[got]) < 0) goto done;
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
        memcpy(PyByteArray_AS_STRING(firsts) + 8 * i, &f, 8);
        memcpy(PyByteArray_AS_STRING(lasts) + 8 * i, &l, 8);
        PyByteArray_AS_STRING(tiled)[i] = (char)ok;
    }
    result = Py_BuildValue("(OOO)", firsts, lasts, tiled);
done:
    Py_XDECREF(firsts);
    Py_XDECREF(lasts);
    Py_XDECREF(tiled);
    for (int g = 0; g < got; g++) PyBuffer_Release(&v[g].view);
    return result;
}

/* --- hparams_event: record.decode_event for the hparams plugin's usual record ----------------- */

/* The one-byte keys of the record's fields, in this order (record.py passes them from
 * fields.py), and the plugin's name. */
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

/* hparams_event(data, keys, plugin) -> (wall_time, step, tag, hparams) for an event of exactly
 * [wall_time] [step] summary{value{tag, [tensor], metadata{plugin_data{`plugin`, content}}}}
 * whose content is a session start of plain values; None for anything else (record.py then
 * decodes it: every record accepted here is one it decodes to the same). */
static PyObject *k_hparams_event(PyObject *self, PyObject *args) {
    PyObject *obj, *keys_obj, *plugin_obj;
    if (!PyArg_ParseTuple(args, "OOO", &obj, &keys_obj, &plugin_obj)) return NULL;
    Bytes b, keys, plugin;
    if (get_bytes(obj, &b, 0) < 0) return NULL;
    if (get_bytes(keys_obj, &keys, 0) < 0) {
        PyBuffer_Release(&b.view);
        return NULL;
    }
    if (get_bytes(plugin_obj, &plugin, 0) < 0) {
        PyBuffer_Release(&keys.view);
        PyBuffer_Release(&b.view);
        return NULL;
    }
    PyObject *result = NULL, *tag = NULL, *hparams = NULL;
    const uint8_t *k = keys.data;
    Cur c = {b.data, 0, b.len}, summary, value, tag_bytes, skipped, meta, data, name, content;
    double wall = 0.0;
    uint64_t step = 0;
    int wide;
    if (keys.len != N_HKEYS) {
        PyErr_SetString(PyExc_ValueError, "bad keys for hparams_event()");
        goto done;
    }
    if (cur_key(&c, k[H_WALL])) {
        if (c.end - c.pos < 8) goto not_this;
        memcpy(&wall, c.p + c.pos, 8);
        c.pos += 8;
    }
    if (cur_key(&c, k[H_STEP]) && cur_varint(&c, &step, &wide) < 0) goto not_this;
    if (!cur_field(&c, k[H_SUMMARY], &summary) || c.pos != c.end) goto not_this;
    if (!cur_field(&summary, k[H_VALUE], &value) || summary.pos != summary.end) goto not_this;
    if (!cur_field(&value, k[H_TAG], &tag_bytes)) goto not_this;
    if (value.pos < value.end && value.p[value.pos] == k[H_TENSOR] &&
        !cur_field(&value, k[H_TENSOR], &skipped))
        goto not_this;
    if (!cur_field(&value, k[H_METADATA], &meta) || value.pos != value.end) goto not_this;
    if (!cur_field(&meta, k[H_PLUGIN_DATA], &data) || meta.pos != meta.end) goto not_this;
    if (!cur_field(&data, k[H_PLUGIN_NAME], &name) || !cur_field(&data, k[H_CONTENT], &content) ||
        data.pos != data.end)
        goto not_this;
    if (name.end - name.pos != plugin.len ||
        memcmp(name.p + name.pos, plugin.data, (size_t)plugin.len) != 0 ||
        content.pos == content.end)
        goto not_this;
    int found = start_hparams(k, content, &hparams);
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

/* --- module ----------------------------------------------------------------------------- */

static PyMethodDef methods[] = {
    {"chain", k_chain, METH_VARARGS,
     "chain(buf, pos, size) -> (heads, stop): follow valid headers of whole records."},
    {"records", k_records, METH_VARARGS,
     "records(buf, heads) -> (starts, lengths, bad heads): framing._check_data."},
    {"crc_ok", k_crc_ok, METH_VARARGS,
     "crc_ok(buf, starts, lengths) -> bools: each record's data CRC holds."},
    {"scalars", k_scalars, METH_VARARGS,
     "scalars(buf, starts, lengths, keys, f32, f64, md, max_tag) -> the fast path's columns."},
    {"by_tag", k_by_tag, METH_VARARGS,
     "by_tag(tag_ids, n, steps, walls, values) -> (edges, steps, walls, values): _by_tag."},
    {"fields", k_fields, METH_VARARGS,
     "fields(data, expected) -> ([(number, wire_type, value)], error or None): wire.fields."},
    {"split", k_split, METH_VARARGS,
     "split(tag_ids, n, bounds, steps, walls, values) -> each file's by_tag, its own memory."},
    {"stats", k_stats, METH_VARARGS,
     "stats(steps, values) -> (increasing, low, high): a series' first read."},
    {"tiles", k_tiles, METH_VARARGS,
     "tiles(starts, lengths, end, trouble, bases, sizes) -> (firsts, lasts, tiled)."},
    {"hparams_event", k_hparams_event, METH_VARARGS,
     "hparams_event(data, keys, plugin) -> (wall, step, tag, hparams) or None: decode_event."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_kernel", NULL, -1, methods, NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__kernel(void) {
    make_tables();
#if HAVE_HW
    __builtin_cpu_init();
    use_hw = __builtin_cpu_supports("sse4.2");
#endif
    return PyModule_Create(&module);
}
