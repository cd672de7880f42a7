/* fileio.c - directory creation, complete writes and reports written under a temporary name. */
#define _GNU_SOURCE
#include "fileio.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <time.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "alloc.h"

static _Thread_local char t_mkdir_why[600]; /* mkdir_p's refusal, said by mkdir_p_error */

/* May the walk use entry st (named comp, a symlink or a directory) found in directory dir? Not
 * when dir is sticky and world-writable (/tmp) and another user, neither the caller nor dir's
 * owner, owns the entry: that user could swap it for a link to anywhere between this check and
 * a write (the kernel's fs.protected_symlinks rule, which may be off). 0, or -1 with the reason
 * in t_mkdir_why. */
static int entry_trusted(const struct stat *dir, const struct stat *st, const char *path,
                         size_t len)
{
    if (!(dir->st_mode & S_ISVTX) || !(dir->st_mode & S_IWOTH))
        return 0;
    if (st->st_uid == geteuid() || st->st_uid == dir->st_uid)
        return 0;
    snprintf(t_mkdir_why, sizeof t_mkdir_why,
             "%.*s is a %s owned by uid %u in a sticky world-writable directory (another user "
             "could have planted it); not used: choose another output directory",
             (int)(len > 400 ? 400 : len), path, S_ISLNK(st->st_mode) ? "symlink" : "directory",
             (unsigned)st->st_uid);
    return -1;
}

/* Creates the directories of rel under the directory open as fd (closed here), one component at
 * a time (mkdirat, then fstatat without following, then openat from the last one's descriptor):
 * in a sticky world-writable directory another user's entry is refused (entry_trusted, EPERM);
 * a symlink is followed where links is 1 and refused (ELOOP) where it is 0, the openat then
 * O_NOFOLLOW so that one swapped in after the look is refused too. 0, or -1 with errno set. */
static int make_dirs(int fd, const char *rel, int links)
{
    char comp[NAME_MAX + 1];
    for (const char *s = rel; *s;) {
        size_t l = strcspn(s, "/");
        if (l == 0) {
            s++;
            continue;
        }
        int err = 0, next = -1;
        struct stat up, st;
        if (l > NAME_MAX) {
            err = ENAMETOOLONG;
        } else {
            memcpy(comp, s, l);
            comp[l] = 0;
            int made = mkdirat(fd, comp, 0755) == 0 ? 0 : errno;
            if (made && made != EEXIST && made != EACCES && made != EROFS)
                err = made; /* EACCES, EROFS: it may exist all the same */
            else if (fstat(fd, &up) != 0 || fstatat(fd, comp, &st, AT_SYMLINK_NOFOLLOW) != 0)
                err = made && made != EEXIST ? made : errno;
            else if (S_ISLNK(st.st_mode) && !links)
                err = ELOOP;
            else if ((S_ISLNK(st.st_mode) || S_ISDIR(st.st_mode)) &&
                     entry_trusted(&up, &st, rel, (size_t)(s - rel) + l) != 0)
                err = EPERM;
            else if ((next = openat(fd, comp, O_RDONLY | O_DIRECTORY | O_CLOEXEC |
                                                  (links ? 0 : O_NOFOLLOW))) < 0) {
                err = errno; /* O_DIRECTORY makes a symlink swapped in ENOTDIR: say which */
                if (!links && fstatat(fd, comp, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
                    S_ISLNK(st.st_mode))
                    err = ELOOP;
            }
        }
        close(fd);
        if (err) {
            errno = err;
            return -1;
        }
        fd = next;
        s += l;
    }
    close(fd);
    return 0;
}

int mkdir_p(const char *dir)
{
    t_mkdir_why[0] = 0;
    if (!dir || !*dir) {
        errno = EINVAL;
        return -1;
    }
    int fd = open(*dir == '/' ? "/" : ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    return fd < 0 ? -1 : make_dirs(fd, dir, 1);
}

const char *mkdir_p_error(int e)
{
    return t_mkdir_why[0] ? t_mkdir_why : strerror(e);
}

/* Set in sonde's own threads, which block every signal for their whole life: their writes
 * cannot raise SIGXFSZ on the host, and a pending one dies with the thread. */
static _Thread_local int t_all_blocked;

void xfsz_all_blocked(void) { t_all_blocked = 1; }

void xfsz_block(xfsz_guard *g)
{
    if (t_all_blocked)
        return;
    sigset_t s, pend;
    sigemptyset(&s);
    sigaddset(&s, SIGXFSZ);
    pthread_sigmask(SIG_BLOCK, &s, &g->old);
    g->was_pending = sigpending(&pend) == 0 && sigismember(&pend, SIGXFSZ);
}

void xfsz_restore(xfsz_guard *g)
{
    if (t_all_blocked)
        return;
    sigset_t s, pend;
    if (!g->was_pending && sigpending(&pend) == 0 && sigismember(&pend, SIGXFSZ)) {
        sigemptyset(&s);
        sigaddset(&s, SIGXFSZ);
        struct timespec zero = {0, 0};
        while (sigtimedwait(&s, NULL, &zero) < 0 && errno == EINTR) {
        }
    }
    pthread_sigmask(SIG_SETMASK, &g->old, NULL);
}

int write_all(int fd, const void *p, size_t n)
{
    const char *c = p;
    while (n) {
        ssize_t w = write(fd, c, n);
        if (w < 0) {
            if (errno == EINTR)
                continue;
            return -1;
        }
        if (w == 0) {
            errno = EIO;
            return -1;
        }
        c += w;
        n -= (size_t)w;
    }
    return 0;
}

char *path_join(const char *dir, const char *name)
{
    size_t a = strlen(dir), b = strlen(name);
    char *r = sonde__malloc(a + b + 2);
    if (!r)
        return NULL;
    memcpy(r, dir, a);
    size_t k = a;
    if (a && dir[a - 1] != '/')
        r[k++] = '/';
    memcpy(r + k, name, b + 1);
    return r;
}

/* The process's umask, read without changing it: umask(2) can only be read by setting it, and
 * for that instant every file another thread creates would get the wrong mode. */
static mode_t current_umask(void)
{
    FILE *f = fopen("/proc/self/status", "re");
    char line[128];
    unsigned um = 022;
    int found = 0;
    while (f && !found && fgets(line, sizeof line, f))
        found = sscanf(line, "Umask: %o", &um) == 1;
    if (f)
        fclose(f);
    if (!found) { /* kernels before 4.7: the only other way */
        mode_t old = umask(022);
        umask(old);
        return old;
    }
    return (mode_t)um;
}

int afile_open(afile *af, const char *path)
{
    af->fd = -1;
    af->tmp = NULL;
    af->path = sonde__strdup(path);
    if (!af->path)
        return -1;
    size_t n = strlen(path);
    af->tmp = sonde__malloc(n + 16);
    if (!af->tmp) {
        sonde__free(af->path);
        af->path = NULL;
        return -1;
    }
    memcpy(af->tmp, path, n);
    memcpy(af->tmp + n, ".tmp-XXXXXX", 12);
    /* mkstemp opens with O_EXCL, so a planted file or symlink is never followed. */
    af->fd = mkostemp(af->tmp, O_CLOEXEC);
    if (af->fd < 0) {
        int e = errno;
        sonde__free(af->tmp);
        sonde__free(af->path);
        af->tmp = af->path = NULL;
        errno = e;
        return -1;
    }
    if (fchmod(af->fd, 0644 & ~current_umask()) != 0) {
        int e = errno;
        afile_abort(af);
        errno = e;
        return -1;
    }
    return 0;
}

int afile_commit(afile *af, int closed_already)
{
    int rc = 0, e = 0;
    if (!closed_already && af->fd >= 0 && close(af->fd) != 0) {
        rc = -1;
        e = errno;
    }
    af->fd = -1;
    if (rc == 0 && rename(af->tmp, af->path) != 0) {
        rc = -1;
        e = errno;
    }
    if (rc != 0)
        unlink(af->tmp);
    sonde__free(af->tmp);
    sonde__free(af->path);
    af->tmp = af->path = NULL;
    if (rc)
        errno = e;
    return rc;
}

void afile_abort(afile *af)
{
    if (af->fd >= 0)
        close(af->fd);
    af->fd = -1;
    if (af->tmp)
        unlink(af->tmp);
    sonde__free(af->tmp);
    sonde__free(af->path);
    af->tmp = af->path = NULL;
}

int write_file_atomic(const char *path, const void *data, size_t n)
{
    afile af;
    if (afile_open(&af, path) != 0)
        return -1;
    if (write_all(af.fd, data, n) != 0) {
        int e = errno;
        afile_abort(&af);
        errno = e;
        return -1;
    }
    return afile_commit(&af, 0);
}

int mkdir_beneath(const char *base, const char *rel)
{
    t_mkdir_why[0] = 0;
    int fd = open(base, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    return fd < 0 ? -1 : make_dirs(fd, rel, 0);
}

int read_file_all(const char *path, size_t max, char **out, size_t *len)
{
    *out = NULL;
    *len = 0;
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK); /* a FIFO must not block the open */
    if (fd < 0)
        return -1;
    struct stat st;
    int err = 0;
    if (fstat(fd, &st) != 0)
        err = errno;
    else if (!S_ISREG(st.st_mode))
        err = EINVAL;
    else if ((uintmax_t)st.st_size > (uintmax_t)max)
        err = EFBIG;
    char *buf = err ? NULL : sonde__malloc((size_t)st.st_size + 1);
    if (!err && !buf)
        err = ENOMEM;
    if (err) {
        close(fd);
        errno = err;
        return -1;
    }
    size_t n = (size_t)st.st_size, got = 0;
    while (got < n) {
        ssize_t r = read(fd, buf + got, n - got);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0) {
            err = errno;
            close(fd);
            sonde__free(buf);
            errno = err;
            return -1;
        }
        if (r == 0)
            break;
        got += (size_t)r;
    }
    close(fd);
    buf[got] = 0;
    *out = buf;
    *len = got;
    return 0;
}
