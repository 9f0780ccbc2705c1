/* Joins one host's per-interface captures (classic pcap, as tcpdump -w writes them) into one
 * pcapng file: a section header, one interface block per capture (linktype, snaplen, if_name,
 * nanosecond timestamps), then every packet as an enhanced packet block tagged with its
 * interface, in time order (ties: the capture listed first, then file order).
 *
 * mprig.run.capture.merge_pcaps calls it once per capturing host and run. Under VM emulation the
 * same join in Python took a good part of a second per run; here it is a sort of an index and
 * one buffered write. tests/unit/test_capture.py checks it byte for byte against a Python
 * statement of the format. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#if __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "pcapng blocks are written in host order; this file assumes little-endian"
#endif

typedef struct {
    const char *name; /* interface name (if_name) */
    const char *path;
    const uint8_t *data;
    size_t size;
    int swap;       /* the file's byte order is not ours */
    uint64_t scale; /* ns per timestamp fraction */
    uint32_t snaplen, linktype;
} part_t;

typedef struct {
    uint64_t t_ns;
    uint64_t offset; /* of the record header */
    uint32_t part;
    uint32_t seq; /* record number in the whole index: stable order on ties */
} rec_t;

static uint32_t u32(const part_t *p, const uint8_t *at)
{
    uint32_t v;
    memcpy(&v, at, 4);
    return p->swap ? __builtin_bswap32(v) : v;
}

/* The header of a classic pcap file; an error message (naming the file) or NULL. */
static const char *read_header(part_t *p, char *why, size_t n)
{
    if (p->size < 24) {
        snprintf(why, n, "%s: not a pcap file (only %zu bytes)", p->path, p->size);
        return why;
    }
    uint32_t magic;
    memcpy(&magic, p->data, 4);
    switch (magic) {
    case 0xA1B2C3D4u: p->swap = 0; p->scale = 1000; break;
    case 0xA1B23C4Du: p->swap = 0; p->scale = 1; break;
    case 0xD4C3B2A1u: p->swap = 1; p->scale = 1000; break;
    case 0x4D3CB2A1u: p->swap = 1; p->scale = 1; break;
    default:
        snprintf(why, n, "%s: not a classic pcap file (magic %02x%02x%02x%02x)", p->path,
                 p->data[0], p->data[1], p->data[2], p->data[3]);
        return why;
    }
    p->snaplen = u32(p, p->data + 16);
    p->linktype = u32(p, p->data + 20) & 0x0FFFFFFFu;
    return NULL;
}

static int by_time(const void *a, const void *b)
{
    const rec_t *x = a, *y = b;
    if (x->t_ns != y->t_ns)
        return x->t_ns < y->t_ns ? -1 : 1;
    return x->seq < y->seq ? -1 : x->seq > y->seq; /* parts are indexed in order */
}

static void put32(FILE *f, uint32_t v) { fwrite(&v, 4, 1, f); }
static void put16(FILE *f, uint16_t v) { fwrite(&v, 2, 1, f); }

static void put_idb(FILE *f, const part_t *p)
{
    size_t name = strlen(p->name), padded = (name + 3) & ~(size_t)3;
    uint32_t total = (uint32_t)(16 + 4 + padded + 8 + 4 + 4); /* header, 3 options, length */
    static const uint8_t zero[4];
    put32(f, 1);
    put32(f, total);
    put16(f, (uint16_t)p->linktype);
    put16(f, 0);
    put32(f, p->snaplen);
    put16(f, 2); /* if_name */
    put16(f, (uint16_t)name);
    fwrite(p->name, 1, name, f);
    fwrite(zero, 1, padded - name, f);
    put16(f, 9); /* if_tsresol: 10^-9 */
    put16(f, 1);
    put32(f, 9);
    put32(f, 0); /* opt_endofopt */
    put32(f, total);
}

/* Index, sort and write; an error message or NULL. Runs without the GIL. */
static const char *join(part_t *parts, size_t nparts, const char *out, uint64_t *count,
                        char *why, size_t n)
{
    size_t cap = 0, len = 0;
    rec_t *recs = NULL;
    for (size_t k = 0; k < nparts; k++) {
        const part_t *p = &parts[k];
        for (size_t pos = 24; pos + 16 <= p->size;) {
            uint32_t caplen = u32(p, p->data + pos + 8);
            if (caplen > p->size - pos - 16)
                break; /* cut short: tcpdump killed mid-write */
            if (len == cap) {
                cap = cap ? cap * 2 : 4096;
                rec_t *more = realloc(recs, cap * sizeof *recs);
                if (!more) {
                    free(recs);
                    return "out of memory";
                }
                recs = more;
            }
            uint64_t sec = u32(p, p->data + pos), frac = u32(p, p->data + pos + 4);
            recs[len] = (rec_t){sec * 1000000000u + frac * p->scale, pos, (uint32_t)k,
                                (uint32_t)len};
            len++;
            pos += 16 + (size_t)caplen;
        }
    }
    qsort(recs, len, sizeof *recs, by_time);
    FILE *f = fopen(out, "wb");
    if (!f) {
        free(recs);
        snprintf(why, n, "%s: %s", out, strerror(errno));
        return why;
    }
    setvbuf(f, NULL, _IOFBF, 1 << 20);
    static const uint8_t shb[28] = {0x0A, 0x0D, 0x0D, 0x0A, 28,   0,    0,    0,    0x4D, 0x3C,
                                    0x2B, 0x1A, 1,    0,    0,    0,    0xFF, 0xFF, 0xFF, 0xFF,
                                    0xFF, 0xFF, 0xFF, 0xFF, 28,   0,    0,    0};
    static const uint8_t zero[4];
    fwrite(shb, 1, sizeof shb, f);
    for (size_t k = 0; k < nparts; k++)
        put_idb(f, &parts[k]);
    for (size_t i = 0; i < len; i++) {
        const part_t *p = &parts[recs[i].part];
        const uint8_t *rec = p->data + recs[i].offset;
        uint32_t caplen = u32(p, rec + 8), origlen = u32(p, rec + 12);
        uint32_t pad = (4 - caplen % 4) % 4, total = 32 + caplen + pad;
        uint32_t head[7] = {6, total, recs[i].part, (uint32_t)(recs[i].t_ns >> 32),
                            (uint32_t)recs[i].t_ns, caplen, origlen};
        fwrite(head, 4, 7, f);
        fwrite(rec + 16, 1, caplen, f);
        fwrite(zero, 1, pad, f);
        put32(f, total);
    }
    free(recs);
    int bad = ferror(f);
    if (fclose(f) != 0 || bad) {
        snprintf(why, n, "%s: %s", out, strerror(errno ? errno : EIO));
        return why;
    }
    *count = len;
    return NULL;
}

static PyObject *pcapmerge_merge(PyObject *self, PyObject *args)
{
    (void)self;
    const char *out;
    PyObject *seq;
    if (!PyArg_ParseTuple(args, "sO", &out, &seq))
        return NULL;
    PyObject *items = PySequence_Fast(seq, "parts: a sequence of (interface, path)");
    if (!items)
        return NULL;
    Py_ssize_t nparts = PySequence_Fast_GET_SIZE(items);
    part_t *parts = calloc((size_t)(nparts ? nparts : 1), sizeof *parts);
    int *fds = malloc((size_t)(nparts ? nparts : 1) * sizeof *fds);
    char why[512];
    const char *err = NULL;
    PyObject *exc = PyExc_ValueError;
    Py_ssize_t opened = 0;
    uint64_t count = 0;
    int sys_errno = 0; /* err is then the file that failed */
    if (!parts || !fds) {
        err = "out of memory";
        goto done;
    }
    for (Py_ssize_t k = 0; k < nparts; k++) {
        part_t *p = &parts[k];
        if (!PyArg_ParseTuple(PySequence_Fast_GET_ITEM(items, k), "ss", &p->name, &p->path))
            goto done;
        if (strlen(p->name) > 255) {
            snprintf(why, sizeof why, "%s: interface name too long", p->path);
            err = why;
            goto done;
        }
        int fd = open(p->path, O_RDONLY | O_CLOEXEC);
        struct stat st;
        if (fd < 0 || fstat(fd, &st) != 0) {
            sys_errno = errno;
            if (fd >= 0)
                close(fd);
            err = p->path;
            goto done;
        }
        fds[opened++] = fd;
        p->size = (size_t)st.st_size;
        p->data = p->size ? mmap(NULL, p->size, PROT_READ, MAP_PRIVATE, fd, 0) : NULL;
        if (p->size && p->data == MAP_FAILED) {
            sys_errno = errno;
            p->data = NULL;
            err = p->path;
            goto done;
        }
        if ((err = read_header(p, why, sizeof why)))
            goto done;
    }
    Py_BEGIN_ALLOW_THREADS
    err = join(parts, (size_t)nparts, out, &count, why, sizeof why);
    Py_END_ALLOW_THREADS
    if (err && err != why)
        exc = PyExc_MemoryError;
    else if (err)
        exc = PyExc_OSError;
done:
    for (Py_ssize_t k = 0; parts && k < opened; k++) {
        if (parts[k].data)
            munmap((void *)parts[k].data, parts[k].size);
        close(fds[k]);
    }
    free(parts);
    free(fds);
    Py_DECREF(items);
    if (PyErr_Occurred())
        return NULL;
    if (err && sys_errno) { /* FileNotFoundError and its kin, naming the file */
        errno = sys_errno;
        PyErr_SetFromErrnoWithFilename(PyExc_OSError, err);
        return NULL;
    }
    if (err) {
        PyErr_SetString(exc, err);
        return NULL;
    }
    return PyLong_FromUnsignedLongLong(count);
}

static PyMethodDef methods[] = {
    {"merge", pcapmerge_merge, METH_VARARGS,
     "merge(out, [(interface, pcap path), ...]) -> packets written (pcapng, time order)."},
    {NULL, NULL, 0, NULL}};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_pcapmerge",
                                    "Per-interface pcap captures joined into one pcapng file.",
                                    -1, methods, NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit__pcapmerge(void) { return PyModule_Create(&module); }
