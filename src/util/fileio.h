/* fileio.h - directory creation, complete writes and reports written under a temporary name. */
#ifndef SONDE_UTIL_FILEIO_H
#define SONDE_UTIL_FILEIO_H

#include <stddef.h>

/* Creates dir and its parents (mode 0755, less the umask), walking it one component at a time.
 * In a sticky world-writable directory (/tmp) a symlink or directory on the way is used only
 * when the caller or that directory's owner owns it: another user's could be swapped for a link
 * to anywhere before the files are written (EPERM; the kernel's fs.protected_symlinks rule,
 * kept whether or not it is on). 0, or -1 with errno set. */
int mkdir_p(const char *dir);
/* What the calling thread's last mkdir_p failed on: its refusal of a planted entry, naming it,
 * or strerror(e) (pass the errno it left). */
const char *mkdir_p_error(int e);

/* Creates the directories of rel ("a/b/c", relative) under base, which exists, never through a
 * symlink: one planted at any of them is refused (errno ELOOP), as is anything there that is
 * not a directory (ENOTDIR). 0, or -1 with errno set. */
int mkdir_beneath(const char *base, const char *rel);

/* Writes all n bytes, retrying on EINTR and short writes. 0, or -1 with errno set.
 * Async-signal-safe. */
int write_all(int fd, const void *p, size_t n);

/* A report being written: created as PATH.tmp-XXXXXX (O_EXCL, never through a symlink), renamed
 * over PATH on commit, so a reader never sees half a file. */
typedef struct afile {
    int fd;
    char *tmp;
    char *path;
} afile;

/* 0 and af->fd open for writing, or -1 with errno set (af holds nothing to free). */
int afile_open(afile *af, const char *path);
/* Closes (if fd >= 0) and renames into place; 0, or -1 with errno set and the temporary removed.
 * Frees af's strings in every case. Pass closed_already=1 when fd was closed by another layer
 * (gzclose). */
int afile_commit(afile *af, int closed_already);
/* Closes and removes the temporary. */
void afile_abort(afile *af);

/* Writes a whole buffer to path through afile. 0, or -1 with errno set. */
int write_file_atomic(const char *path, const void *data, size_t n);

/* sonde's own writes must not bring SIGXFSZ (a file-size limit) down on the host: around them
 * the signal is blocked in the calling thread, and one that they raised is taken off again, so
 * the write fails with EFBIG instead. A SIGXFSZ pending before is left for the host. */
#include <signal.h>
typedef struct xfsz_guard {
    sigset_t old;
    int was_pending;
} xfsz_guard;
void xfsz_block(xfsz_guard *g);
void xfsz_restore(xfsz_guard *g);
/* Called by a thread of sonde's own that has blocked every signal for good (writer, sampler):
 * its guards then cost nothing, where they would be four system calls per write. */
void xfsz_all_blocked(void);

/* Reads the whole regular file at path into a malloc'ed buffer with a NUL after its *len bytes.
 * 0, or -1 with errno set: open's errno, EINVAL when path is not a regular file, EFBIG when it
 * holds more than max bytes, ENOMEM. */
int read_file_all(const char *path, size_t max, char **out, size_t *len);

/* Joins dir and name with one '/'; malloc'ed, NULL when out of memory. */
char *path_join(const char *dir, const char *name);

#endif
