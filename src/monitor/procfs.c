/* procfs.c - the CPU, memory, load and process figures of Linux's /proc: system CPU (total and
 * per core), process CPU (user, system), system memory, process RSS and peak RSS, threads, I/O
 * bytes and the load average. */
#define _GNU_SOURCE
#include <ctype.h>
#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>

#include "monitor.h"
#include "../util/alloc.h"

#define MAX_CPUS 1024

#define MAX_TREE 4096   /* processes followed in a tree */
#define MAX_TRACKS 64   /* processes that get counters of their own */

typedef struct proc_seen {
    int pid;
    unsigned long long cpu;  /* its own utime + stime at the last sample */
    int track;               /* 1 once it has its own counters */
    char comm[32];           /* its name when last described (it changes at exec) */
} proc_seen;

struct procfs_state {
    pid_t pid;
    int tree;                       /* pid is another process: sample it and its descendants */
    proc_seen *seen;                /* tree mode: the processes of the last sample */
    size_t n_seen;
    int tracks;                     /* processes given their own counters so far */
    double peak_rss;                /* tree mode: highest summed RSS seen */
    int cpu, memory;
    int primed;
    int ncpu;                       /* per-core rows seen in /proc/stat */
    double cpu_cap;                 /* 100 x the online cores: the most a process can use */
    unsigned long long *busy, *total; /* previous jiffies: [0] all, [1 + i] core i */
    unsigned long long proc_user, proc_sys;
    double prev_wall;
    long hz;
    int io_ok;                      /* /proc/PID/io was readable */
    char path_stat[64], path_status[64], path_io[64];
};

/* Reads a small /proc file into buf; its length, or -1. */
static ssize_t read_small(const char *path, char *buf, size_t cap)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    size_t n = 0;
    while (n < cap - 1) {
        ssize_t r = read(fd, buf + n, cap - 1 - n);
        if (r <= 0)
            break;
        n += (size_t)r;
    }
    close(fd);
    buf[n] = 0;
    return (ssize_t)n;
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

procfs_state *procfs_open(pid_t pid, int cpu, int memory)
{
    procfs_state *s = sonde__calloc(1, sizeof *s);
    if (!s)
        return NULL;
    s->pid = pid;
    s->cpu = cpu;
    s->memory = memory;
    s->busy = sonde__calloc(MAX_CPUS + 1, sizeof *s->busy);
    s->total = sonde__calloc(MAX_CPUS + 1, sizeof *s->total);
    if (!s->busy || !s->total) {
        procfs_close(s);
        return NULL;
    }
    s->tree = pid != 0;
    if (s->tree && !(s->seen = sonde__calloc(MAX_TREE, sizeof *s->seen))) {
        procfs_close(s);
        return NULL;
    }
    s->hz = sysconf(_SC_CLK_TCK);
    if (s->hz <= 0)
        s->hz = 100;
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    s->cpu_cap = 100.0 * (double)(cores > 0 ? cores : 1);
    if (pid) {
        snprintf(s->path_stat, sizeof s->path_stat, "/proc/%d/stat", (int)pid);
        snprintf(s->path_status, sizeof s->path_status, "/proc/%d/status", (int)pid);
        snprintf(s->path_io, sizeof s->path_io, "/proc/%d/io", (int)pid);
    } else {
        snprintf(s->path_stat, sizeof s->path_stat, "/proc/self/stat");
        snprintf(s->path_status, sizeof s->path_status, "/proc/self/status");
        snprintf(s->path_io, sizeof s->path_io, "/proc/self/io");
    }
    return s;
}

void procfs_close(procfs_state *s)
{
    if (!s)
        return;
    sonde__free(s->busy);
    sonde__free(s->total);
    sonde__free(s->seen);
    sonde__free(s);
}

/* "Key:   123 kB" in a /proc status-like text; -1 when absent. */
static long long field_kb(const char *text, const char *key)
{
    size_t kl = strlen(key);
    for (const char *p = text; p && *p; p = strchr(p, '\n'), p = p ? p + 1 : NULL) {
        if (!strncmp(p, key, kl) && p[kl] == ':')
            return strtoll(p + kl + 1, NULL, 10);
    }
    return -1;
}

void procfs_describe(procfs_state *s, const sonde_emit *e)
{
    (void)s;
    char buf[8192], val[256];
    if (read_small("/proc/cpuinfo", buf, sizeof buf) > 0) {
        char *m = strstr(buf, "model name");
        if (m && (m = strchr(m, ':'))) {
            m++;
            while (*m == ' ' || *m == '\t')
                m++;
            size_t n = strcspn(m, "\n");
            snprintf(val, sizeof val, "%.*s", (int)n, m);
            e->info(e->ctx, "cpu_model", val);
        }
    }
    snprintf(val, sizeof val, "%ld", sysconf(_SC_NPROCESSORS_ONLN));
    e->info(e->ctx, "cpu_cores", val);
    if (read_small("/proc/meminfo", buf, sizeof buf) > 0) {
        long long kb = field_kb(buf, "MemTotal");
        if (kb > 0) {
            snprintf(val, sizeof val, "%.0f", (double)kb / 1024.0);
            e->info(e->ctx, "memory_total_mib", val);
        }
    }
    struct utsname u;
    if (uname(&u) == 0) {
        snprintf(val, sizeof val, "%s %s %s", u.sysname, u.release, u.machine);
        e->info(e->ctx, "kernel", val);
        e->info(e->ctx, "hostname", u.nodename);
    }
}

/* /proc/stat: system CPU, total and per core; and the load average. */
static void sample_cpu_system(procfs_state *s, const sonde_emit *e)
{
    char *buf = sonde__malloc(256 * 1024);
    if (!buf)
        return;
    if (read_small("/proc/stat", buf, 256 * 1024) <= 0) {
        sonde__free(buf);
        return;
    }
    int row = 0;
    for (char *line = buf; line && *line && row <= MAX_CPUS; line = strchr(line, '\n'), line = line ? line + 1 : NULL) {
        if (strncmp(line, "cpu", 3) != 0)
            break; /* the cpu rows come first */
        int idx;
        char *p = line + 3;
        if (*p == ' ')
            idx = 0;
        else if (isdigit((unsigned char)*p))
            idx = 1 + atoi(p);
        else
            continue;
        if (idx > MAX_CPUS)
            continue;
        while (*p && *p != ' ')
            p++;
        unsigned long long v[10] = {0};
        for (int i = 0; i < 10; i++)
            v[i] = strtoull(p, &p, 10);
        /* user nice system idle iowait irq softirq steal (guest time is inside user) */
        unsigned long long idle = v[3] + v[4];
        unsigned long long total = v[0] + v[1] + v[2] + v[3] + v[4] + v[5] + v[6] + v[7];
        unsigned long long busy = total - idle;
        if (s->primed && total > s->total[idx]) {
            double pct = 100.0 * (double)(busy - s->busy[idx]) / (double)(total - s->total[idx]);
            char name[32];
            if (idx == 0)
                snprintf(name, sizeof name, "cpu %%");
            else
                snprintf(name, sizeof name, "cpu%d %%", idx - 1);
            e->counter(e->ctx, name, pct < 0 ? 0 : pct > 100 ? 100 : pct);
        }
        s->busy[idx] = busy;
        s->total[idx] = total;
        if (idx > s->ncpu)
            s->ncpu = idx;
        row++;
    }
    sonde__free(buf);
    char st[256];
    if (read_small("/proc/loadavg", st, sizeof st) > 0) {
        double l1, l5, l15;
        if (sscanf(st, "%lf %lf %lf", &l1, &l5, &l15) == 3) {
            e->counter(e->ctx, "load 1m", l1);
            e->counter(e->ctx, "load 5m", l5);
            e->counter(e->ctx, "load 15m", l15);
        }
    }
}

/* A process's CPU share held to what the machine can give: /proc counts in clock ticks (10 ms
 * at 100 Hz), so over a sampling interval near a tick one tick more or less is a large share
 * (6,988% was seen on 2 cores at cpu_interval_s 0.01). docs/metrics.md says so. */
static double cap(const procfs_state *s, double pct)
{
    return pct > s->cpu_cap ? s->cpu_cap : pct;
}

static void sample_cpu(procfs_state *s, const sonde_emit *e)
{
    sample_cpu_system(s, e);
    /* This process: utime and stime (fields 14, 15) after the command's closing parenthesis. */
    char st[4096];
    double wall = now_s();
    if (read_small(s->path_stat, st, sizeof st) > 0) {
        char *p = strrchr(st, ')');
        if (p) {
            unsigned long long ut = 0, stt = 0;
            long threads = 0;
            /* after ')': state(3) ppid(4) ... utime(14) stime(15) ... num_threads(20) */
            if (sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu %*d %*d %*d "
                              "%*d %ld", &ut, &stt, &threads) == 3) {
                if (s->primed && wall > s->prev_wall) {
                    double dt = (wall - s->prev_wall) * (double)s->hz;
                    double u = cap(s, 100.0 * (double)(ut - s->proc_user) / dt);
                    double y = cap(s, 100.0 * (double)(stt - s->proc_sys) / dt);
                    e->counter(e->ctx, "process cpu %", cap(s, u + y));
                    e->counter(e->ctx, "process cpu user %", u);
                    e->counter(e->ctx, "process cpu system %", y);
                }
                s->proc_user = ut;
                s->proc_sys = stt;
            }
        }
    }
    s->prev_wall = wall;
}

static void sample_system_memory(const sonde_emit *e)
{
    char buf[8192];
    if (read_small("/proc/meminfo", buf, sizeof buf) > 0) {
        long long total = field_kb(buf, "MemTotal"), avail = field_kb(buf, "MemAvailable");
        if (total > 0 && avail >= 0) {
            e->counter(e->ctx, "memory used MiB", (double)(total - avail) / 1024.0);
            e->counter(e->ctx, "memory available MiB", (double)avail / 1024.0);
        }
    }
}

static void sample_memory(procfs_state *s, const sonde_emit *e)
{
    char buf[8192];
    sample_system_memory(e);
    if (read_small(s->path_status, buf, sizeof buf) > 0) {
        long long rss = field_kb(buf, "VmRSS"), hwm = field_kb(buf, "VmHWM");
        long long threads = field_kb(buf, "Threads");
        if (rss >= 0)
            e->counter(e->ctx, "rss MiB", (double)rss / 1024.0);
        if (hwm >= 0)
            e->counter(e->ctx, "rss peak MiB", (double)hwm / 1024.0);
        if (threads >= 0)
            e->counter(e->ctx, "threads", (double)threads);
    }
    if (read_small(s->path_io, buf, sizeof buf) > 0) {
        char *r = strstr(buf, "read_bytes:"), *w = strstr(buf, "\nwrite_bytes:");
        if (r && w) {
            e->counter(e->ctx, "io read MiB", (double)strtoull(r + 11, NULL, 10) / 1048576.0);
            e->counter(e->ctx, "io write MiB", (double)strtoull(w + 13, NULL, 10) / 1048576.0);
            s->io_ok = 1;
        }
    }
}

int procfs_memory(procfs_state *s, procfs_mem *out)
{
    char buf[8192];
    memset(out, 0, sizeof *out);
    if (read_small("/proc/meminfo", buf, sizeof buf) <= 0)
        return -1;
    long long total = field_kb(buf, "MemTotal"), avail = field_kb(buf, "MemAvailable");
    if (total > 0 && avail >= 0) {
        out->sys_total = (unsigned long long)total * 1024;
        out->sys_used = (unsigned long long)(total - avail) * 1024;
    }
    if (read_small(s->path_status, buf, sizeof buf) <= 0)
        return -1;
    long long rss = field_kb(buf, "VmRSS"), hwm = field_kb(buf, "VmHWM");
    if (rss < 0)
        return -1;
    out->rss = (unsigned long long)rss * 1024;
    out->rss_peak = hwm >= 0 ? (unsigned long long)hwm * 1024 : out->rss;
    return 0;
}

/* One process of a tree: parent, CPU ticks (own and reaped children's), threads, RSS pages. */
typedef struct proc_row {
    int pid, ppid;
    unsigned long long cpu;        /* its own utime + stime */
    unsigned long long user, sys;  /* own and reaped children's, for the tree's total */
    long threads, rss_pages;
    char comm[32];
} proc_row;

static int read_row(int pid, proc_row *r)
{
    char path[64], st[4096];
    snprintf(path, sizeof path, "/proc/%d/stat", pid);
    if (read_small(path, st, sizeof st) <= 0)
        return -1;
    char *open_p = strchr(st, '('), *close_p = strrchr(st, ')');
    if (!open_p || !close_p)
        return -1;
    r->pid = pid;
    snprintf(r->comm, sizeof r->comm, "%.*s", (int)(close_p - open_p - 1), open_p + 1);
    unsigned long long ut, stt, cut, cst;
    long long cut_l, cst_l;
    if (sscanf(close_p + 2, "%*c %d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu %lld %lld %*d "
                            "%*d %ld %*d %*u %*u %ld", &r->ppid, &ut, &stt, &cut_l, &cst_l,
               &r->threads, &r->rss_pages) != 7)
        return -1;
    cut = cut_l > 0 ? (unsigned long long)cut_l : 0;
    cst = cst_l > 0 ? (unsigned long long)cst_l : 0;
    r->user = ut + cut;
    r->sys = stt + cst;
    r->cpu = ut + stt;
    return 0;
}

/* The tree rooted at s->pid: summed and per-process CPU, RSS, threads, I/O. */
static void sample_tree(procfs_state *s, const sonde_emit *e)
{
    DIR *d = opendir("/proc");
    if (!d)
        return;
    proc_row *rows = sonde__malloc(MAX_TREE * sizeof *rows);
    if (!rows) {
        closedir(d);
        return;
    }
    size_t n = 0;
    struct dirent *de;
    while ((de = readdir(d)) && n < MAX_TREE) {
        if (de->d_name[0] < '1' || de->d_name[0] > '9')
            continue;
        if (read_row(atoi(de->d_name), &rows[n]) == 0)
            n++;
    }
    closedir(d);
    /* keep the descendants of the root: repeat until nothing joins (any order of pids) */
    char *in = sonde__calloc(n ? n : 1, 1);
    if (!in) {
        sonde__free(rows);
        return;
    }
    for (size_t i = 0; i < n; i++)
        in[i] = rows[i].pid == s->pid;
    for (int changed = 1; changed;) {
        changed = 0;
        for (size_t i = 0; i < n; i++) {
            if (in[i])
                continue;
            for (size_t j = 0; j < n; j++)
                if (in[j] && rows[i].ppid == rows[j].pid) {
                    in[i] = 1;
                    changed = 1;
                    break;
                }
        }
    }
    double wall = now_s(), dt = s->primed ? wall - s->prev_wall : 0;
    long page = sysconf(_SC_PAGESIZE);
    double rss = 0, cpu_pct = 0, user_pct = 0, sys_pct = 0, rd = 0, wr = 0;
    long threads = 0;
    size_t procs = 0;
    unsigned long long user = 0, sys = 0;
    proc_seen *next = sonde__calloc(MAX_TREE, sizeof *next);
    size_t nn = 0;
    for (size_t i = 0; i < n && next; i++) {
        if (!in[i])
            continue;
        const proc_row *r = &rows[i];
        procs++;
        double mib = (double)r->rss_pages * (double)page / 1048576.0;
        rss += mib;
        threads += r->threads;
        user += r->user;
        sys += r->sys;
        char path[64], io[2048];
        snprintf(path, sizeof path, "/proc/%d/io", r->pid);
        if (s->memory && read_small(path, io, sizeof io) > 0) {
            char *a = strstr(io, "read_bytes:"), *b = strstr(io, "\nwrite_bytes:");
            if (a && b) {
                rd += (double)strtoull(a + 11, NULL, 10) / 1048576.0;
                wr += (double)strtoull(b + 13, NULL, 10) / 1048576.0;
            }
        }
        /* this process's own tracks: CPU % since the last sample and RSS */
        size_t k;
        for (k = 0; k < s->n_seen && s->seen[k].pid != r->pid; k++) {
        }
        proc_seen ps = {r->pid, r->cpu, 0, ""};
        if (k < s->n_seen) {
            ps.track = s->seen[k].track;
            memcpy(ps.comm, s->seen[k].comm, sizeof ps.comm);
        }
        int new_track = !ps.track && s->tracks < MAX_TRACKS;
        if (new_track) {
            ps.track = 1;
            s->tracks++;
        }
        /* described when first seen, and again when its name changed: a child first seen between
         * fork and exec still carries its parent's name (the later fact wins) */
        if (ps.track && (new_track || strcmp(ps.comm, r->comm))) {
            snprintf(ps.comm, sizeof ps.comm, "%s", r->comm);
            char key[64], val[96];
            snprintf(key, sizeof key, "process_%d", r->pid);
            snprintf(val, sizeof val, "%s (child of %d)", r->comm, r->ppid);
            e->info(e->ctx, key, val);
        }
        if (ps.track) {
            char name[64];
            if (s->memory) {
                snprintf(name, sizeof name, "pid %d rss MiB", r->pid);
                e->counter(e->ctx, name, mib);
            }
            if (s->cpu && k < s->n_seen && dt > 0) {
                snprintf(name, sizeof name, "pid %d cpu %%", r->pid);
                double d2 = (double)(r->cpu - s->seen[k].cpu);
                e->counter(e->ctx, name, cap(s, 100.0 * (d2 > 0 ? d2 : 0) / (dt * (double)s->hz)));
            }
        }
        next[nn++] = ps;
    }
    if (s->cpu && s->primed && dt > 0) {
        double du = (double)user - (double)s->proc_user, ds = (double)sys - (double)s->proc_sys;
        /* processes that exited unreaped between samples take their time with them */
        user_pct = cap(s, du > 0 ? 100.0 * du / (dt * (double)s->hz) : 0);
        sys_pct = cap(s, ds > 0 ? 100.0 * ds / (dt * (double)s->hz) : 0);
        cpu_pct = cap(s, user_pct + sys_pct);
        e->counter(e->ctx, "process cpu %", cpu_pct);
        e->counter(e->ctx, "process cpu user %", user_pct);
        e->counter(e->ctx, "process cpu system %", sys_pct);
    }
    s->proc_user = user;
    s->proc_sys = sys;
    s->prev_wall = wall;
    if (s->memory && procs) {
        if (rss > s->peak_rss)
            s->peak_rss = rss;
        e->counter(e->ctx, "rss MiB", rss);
        e->counter(e->ctx, "rss peak MiB", s->peak_rss);
        e->counter(e->ctx, "threads", (double)threads);
        e->counter(e->ctx, "io read MiB", rd);
        e->counter(e->ctx, "io write MiB", wr);
    }
    if (procs)
        e->counter(e->ctx, "processes", (double)procs);
    if (next) {
        memcpy(s->seen, next, nn * sizeof *next);
        s->n_seen = nn;
        sonde__free(next);
    }
    sonde__free(in);
    sonde__free(rows);
}

void procfs_sample(procfs_state *s, const sonde_emit *e)
{
    if (s->tree) {
        /* system-wide figures as usual, the process figures over the tree */
        if (s->cpu)
            sample_cpu_system(s, e);
        if (s->memory)
            sample_system_memory(e);
        sample_tree(s, e);
    } else {
        if (s->cpu)
            sample_cpu(s, e);
        if (s->memory)
            sample_memory(s, e);
    }
    s->primed = 1;
}
