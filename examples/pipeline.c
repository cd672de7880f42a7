/* pipeline.c - the demo: a CPU pipeline shaped like diffusion video generation, doing real work.
 *
 *   load        build the weights (random, seeded)
 *   encode      text encoding: embedding lookup for the prompt's tokens, then a few matrix
 *               multiplies with a nonlinearity (a tiny transformer-free encoder)
 *   denoise     N steps; each step updates K blocks of frames, each block a matrix multiply of
 *               its latent frames by a weight matrix plus a nonlinearity, split over 2 workers
 *   decode      the latents projected back to pixels, frame by frame
 *
 * Every stage is a sonde section with metadata; blocks record FLOPs computed from their shapes
 * and throughput in frames; encoding records throughput in tokens; each step records a counter
 * (the latent's RMS) and a step mark. Usage:
 *   pipeline [--steps N] [--blocks K] [--frames F] [--dim D] [--name NAME] [--quiet]
 *            [--profile* flags, listed by --profile-help]
 */
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <sonde/sonde.h>

typedef struct opts {
    int steps, blocks, frames, dim, tokens, vocab;
    const char *name;
    int quiet;
} opts;

typedef struct pipeline {
    opts o;
    sonde_profiler *p;
    float *embed;   /* vocab x dim */
    float *w_text;  /* dim x dim */
    float *w_block; /* dim x dim */
    float *w_out;   /* dim x dim */
    float *latent;  /* blocks x frames x dim */
    float *scratch; /* blocks x frames x dim */
    float *cond;    /* dim: pooled text embedding */
    int step;
    pthread_barrier_t start, done;
    int stop;
} pipeline;

static uint64_t rng = 0x9e3779b97f4a7c15ull;
static float frand(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (float)((double)(rng >> 11) / 9007199254740992.0 * 2.0 - 1.0);
}

static float *alloc_rand(size_t n, float scale)
{
    float *a = malloc(n * sizeof *a);
    if (!a) {
        fprintf(stderr, "pipeline: out of memory\n");
        exit(1);
    }
    for (size_t i = 0; i < n; i++)
        a[i] = frand() * scale;
    return a;
}

/* out[r x d] = in[r x d] * w[d x d], the i-k-j order so the inner loop vectorises. */
static void matmul(float *out, const float *in, const float *w, int rows, int d)
{
    for (int r = 0; r < rows; r++) {
        float *o = out + (size_t)r * d;
        memset(o, 0, (size_t)d * sizeof *o);
        for (int k = 0; k < d; k++) {
            float a = in[(size_t)r * d + k];
            const float *wr = w + (size_t)k * d;
            for (int j = 0; j < d; j++)
                o[j] += a * wr[j];
        }
    }
}

static double matmul_flops(int rows, int d) { return 2.0 * rows * (double)d * d; }

static void gelu(float *x, size_t n)
{
    for (size_t i = 0; i < n; i++)
        x[i] = 0.5f * x[i] * (1.0f + tanhf(0.7978845608f * (x[i] + 0.044715f * x[i] * x[i] * x[i])));
}

static void load(pipeline *pl)
{
    SONDE_FUNCTION(pl->p);
    size_t d = (size_t)pl->o.dim;
    float s = 1.0f / sqrtf((float)d);
    pl->embed = alloc_rand((size_t)pl->o.vocab * d, 1.0f);
    pl->w_text = alloc_rand(d * d, s);
    pl->w_block = alloc_rand(d * d, s);
    pl->w_out = alloc_rand(d * d, s);
    size_t lat = (size_t)pl->o.blocks * pl->o.frames * d;
    pl->latent = alloc_rand(lat, 1.0f);
    pl->scratch = malloc(lat * sizeof(float));
    pl->cond = calloc(d, sizeof(float));
    if (!pl->scratch || !pl->cond) {
        fprintf(stderr, "pipeline: out of memory\n");
        exit(1);
    }
    sonde_metadata(pl->p, "dim", "model width");
    double params = (double)pl->o.vocab * d + 3.0 * d * d;
    sonde_metric(pl->p, "parameters", params);
}

static void encode(pipeline *pl, const char *prompt)
{
    SONDE_SCOPE(pl->p, "text_encoding");
    int d = pl->o.dim, n = pl->o.tokens;
    char buf[32];
    snprintf(buf, sizeof buf, "%d", n);
    sonde_metadata(pl->p, "tokens", buf);
    float *h = malloc((size_t)n * d * sizeof *h), *h2 = malloc((size_t)n * d * sizeof *h2);
    if (!h || !h2)
        exit(1);
    {
        SONDE_SCOPE(pl->p, "embedding_lookup");
        size_t len = strlen(prompt);
        for (int t = 0; t < n; t++) {
            unsigned tok = (unsigned)(prompt[t % len] * 31 + t) % (unsigned)pl->o.vocab;
            memcpy(h + (size_t)t * d, pl->embed + (size_t)tok * d, (size_t)d * sizeof *h);
        }
    }
    for (int layer = 0; layer < 4; layer++) {
        SONDE_SCOPE(pl->p, "encoder_layer");
        snprintf(buf, sizeof buf, "%d", layer);
        sonde_metadata(pl->p, "layer", buf);
        matmul(h2, h, pl->w_text, n, d);
        gelu(h2, (size_t)n * d);
        float *t = h;
        h = h2;
        h2 = t;
        sonde_flops(pl->p, matmul_flops(n, d));
    }
    for (int j = 0; j < d; j++) {
        float acc = 0;
        for (int t = 0; t < n; t++)
            acc += h[(size_t)t * d + j];
        pl->cond[j] = acc / (float)n;
    }
    sonde_throughput_unit(pl->p, n, 0, "tokens");
    free(h);
    free(h2);
}

/* PIPELINE_SLOWDOWN=STAGE=FRACTION makes one stage slower by that fraction of its own time, to
 * try `sonde diff` on a known regression (denoise_block and decode read it). */
static double slowdown(const char *stage)
{
    const char *v = getenv("PIPELINE_SLOWDOWN");
    size_t n = strlen(stage);
    if (!v || strncmp(v, stage, n) || v[n] != '=')
        return 0;
    return atof(v + n + 1);
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void spin_extra(double t0, double fraction)
{
    if (fraction <= 0)
        return;
    double end = now_s() + (now_s() - t0) * fraction;
    while (now_s() < end) {
    }
}

/* One block of frames: latent <- latent + 0.1 * gelu(latent * W + cond). */
static void denoise_block(pipeline *pl, int b)
{
    SONDE_SCOPE(pl->p, "denoise_block");
    double t0 = now_s(), slow = slowdown("denoise_block");
    int d = pl->o.dim, f = pl->o.frames;
    char buf[32];
    snprintf(buf, sizeof buf, "%d", b);
    sonde_metadata(pl->p, "block", buf);
    float *lat = pl->latent + (size_t)b * f * d, *tmp = pl->scratch + (size_t)b * f * d;
    matmul(tmp, lat, pl->w_block, f, d);
    for (int r = 0; r < f; r++)
        for (int j = 0; j < d; j++)
            tmp[(size_t)r * d + j] += pl->cond[j];
    gelu(tmp, (size_t)f * d);
    for (size_t i = 0; i < (size_t)f * d; i++)
        lat[i] = 0.9f * lat[i] + 0.1f * tmp[i];
    sonde_flops(pl->p, matmul_flops(f, d) + 12.0 * f * d);
    sonde_throughput_unit(pl->p, f, 0, "frames");
    spin_extra(t0, slow);
    /* a block record: its frames and the memory of its latent and scratch rows */
    sonde_block(pl->p, b, f, 0, 2.0 * f * d * sizeof(float) / 1e6);
}

typedef struct worker {
    pipeline *pl;
    int id;
} worker;

static void *worker_main(void *arg)
{
    worker *w = arg;
    pipeline *pl = w->pl;
    char name[32];
    snprintf(name, sizeof name, "denoise-worker-%d", w->id);
    sonde_thread_name(pl->p, name); /* its rows in the trace and the HTML timeline */
    for (;;) {
        pthread_barrier_wait(&pl->start);
        if (pl->stop)
            break;
        for (int b = w->id; b < pl->o.blocks; b += 2)
            denoise_block(pl, b);
        pthread_barrier_wait(&pl->done);
    }
    return NULL;
}

static void denoise(pipeline *pl)
{
    SONDE_SCOPE(pl->p, "denoising");
    pthread_t th[2];
    worker ws[2];
    pthread_barrier_init(&pl->start, NULL, 3);
    pthread_barrier_init(&pl->done, NULL, 3);
    for (int i = 0; i < 2; i++) {
        ws[i].pl = pl;
        ws[i].id = i;
        pthread_create(&th[i], NULL, worker_main, &ws[i]);
    }
    for (int s = 0; s < pl->o.steps; s++) {
        sonde_step_begin(pl->p); /* the step is this iteration: what came before is in none */
        SONDE_SCOPE(pl->p, "denoise_step");
        char buf[32];
        snprintf(buf, sizeof buf, "%d", s);
        sonde_metadata(pl->p, "step", buf);
        snprintf(buf, sizeof buf, "%.0f", 1000.0 * (1.0 - (double)s / pl->o.steps));
        sonde_metadata(pl->p, "timestep", buf);
        pl->step = s;
        pthread_barrier_wait(&pl->start);
        pthread_barrier_wait(&pl->done);
        size_t n = (size_t)pl->o.blocks * pl->o.frames * pl->o.dim;
        double sq = 0;
        for (size_t i = 0; i < n; i++)
            sq += (double)pl->latent[i] * pl->latent[i];
        sonde_counter(pl->p, "latent_rms", sqrt(sq / (double)n));
        /* a diffusion step record: its timestep and guidance, over this section's duration */
        sonde_diffusion_step(pl->p, s, 1000.0 * (1.0 - (double)s / pl->o.steps), pl->o.blocks, 0,
                             7.5);
        sonde_step(pl->p);
    }
    pl->stop = 1;
    pthread_barrier_wait(&pl->start);
    for (int i = 0; i < 2; i++)
        pthread_join(th[i], NULL);
    pthread_barrier_destroy(&pl->start);
    pthread_barrier_destroy(&pl->done);
}

static double decode(pipeline *pl)
{
    SONDE_SCOPE(pl->p, "decode");
    int d = pl->o.dim, frames = pl->o.blocks * pl->o.frames;
    float *px = malloc((size_t)d * sizeof *px);
    if (!px)
        exit(1);
    double checksum = 0;
    for (int fr = 0; fr < frames; fr++) {
        matmul(px, pl->latent + (size_t)fr * d, pl->w_out, 1, d);
        for (int j = 0; j < d; j++)
            checksum += px[j] > 0 ? px[j] : 0;
    }
    sonde_flops(pl->p, matmul_flops(frames, d));
    sonde_throughput_unit(pl->p, frames, 0, "frames");
    sonde_event(pl->p, "video ready");
    free(px);
    return checksum;
}

static int parse_int(const char *flag, const char *v, int lo, int hi)
{
    char *end;
    long x = v ? strtol(v, &end, 10) : 0;
    if (!v || *end || x < lo || x > hi) {
        fprintf(stderr, "pipeline: %s expects an integer in %d..%d\n", flag, lo, hi);
        exit(2);
    }
    return (int)x;
}

/* The demo's whole run; `sonde demo` calls it too (built with SONDE_PIPELINE_NO_MAIN). */
int sonde_pipeline_main(int argc, char **argv);

int sonde_pipeline_main(int argc, char **argv)
{
    opts o = {.steps = 40, .blocks = 8, .frames = 64, .dim = 1024, .tokens = 77, .vocab = 4096,
              .name = "pipeline", .quiet = 0};
    /* sonde's settings: defaults, then SONDE_* (and SONDE_CONFIG), then --profile* flags,
     * which are removed so the loop below sees only the pipeline's own arguments. */
    sonde_config cfg = sonde_config_default();
    cfg.name = o.name;
    cfg.unit = "frames";
    if (sonde_config_from_env(&cfg) != 0) {
        fprintf(stderr, "pipeline: %s\n", sonde_last_error());
        return 2;
    }
    int frc = sonde_config_from_args(&cfg, &argc, argv);
    if (frc < 0) {
        fprintf(stderr, "pipeline: %s\n", sonde_last_error());
        return 2;
    }
    if (frc == 1)
        return 0; /* --profile-help */
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--steps")) o.steps = parse_int(a, v, 1, 100000), i++;
        else if (!strcmp(a, "--blocks")) o.blocks = parse_int(a, v, 1, 1024), i++;
        else if (!strcmp(a, "--frames")) o.frames = parse_int(a, v, 1, 4096), i++;
        else if (!strcmp(a, "--dim")) o.dim = parse_int(a, v, 8, 4096), i++;
        else if (!strcmp(a, "--name")) o.name = cfg.name = v, i++;
        else if (!strcmp(a, "--quiet")) o.quiet = 1;
        else {
            fprintf(stderr, "usage: pipeline [--steps N] [--blocks K] [--frames F] [--dim D] "
                            "[--name NAME] [--quiet]\n");
            return 2;
        }
    }
    pipeline pl;
    memset(&pl, 0, sizeof pl);
    pl.o = o;
    pl.p = sonde_create(&cfg);
    if (!pl.p) {
        fprintf(stderr, "pipeline: %s\n", sonde_last_error());
        return 1;
    }
    char dims[64]; /* the run's own facts: the model's shape, as every report shows them */
    snprintf(dims, sizeof dims, "%d blocks x %d frames x %d", o.blocks, o.frames, o.dim);
    sonde_metadata(pl.p, "model", "toy video diffusion");
    sonde_metadata(pl.p, "latent", dims);
    sonde_session_begin(pl.p, "setup");
    load(&pl);
    sonde_session_end(pl.p);

    sonde_session_begin(pl.p, "generate");
    sonde_metadata(pl.p, "prompt", "a red fox running through snow");
    encode(&pl, "a red fox running through snow");
    denoise(&pl);
    decode(&pl);
    sonde_session_end(pl.p);

    sonde_summary_t *sum = sonde_summary(pl.p);
    const char *dir = cfg.output_dir, *name = sonde_name(pl.p);
    char *stem = malloc(strlen(dir) + strlen(name) + 2);
    if (stem)
        sprintf(stem, "%s/%s", dir, name);
    int said = sonde_status(pl.p) != 0; /* libsonde printed its status on stderr when it came */
    int rc = sonde_destroy(pl.p);
    if (!o.quiet && stem) {
        FILE *f;
        char path[4096];
        snprintf(path, sizeof path, "%s.txt", stem);
        if ((f = fopen(path, "r"))) {
            char line[512];
            while (fgets(line, sizeof line, f))
                fputs(line, stdout);
            fclose(f);
        }
        if (sum && !sum->not_recorded)
            printf("\n%llu sections recorded, %.1f %s/s\n", (unsigned long long)sum->sections,
                   sum->units_per_s, sum->unit);
        printf("files:\n");
        static const char *ext[] = {".sonde", ".json", ".csv", ".instances.csv", ".txt",
                                    ".trace.json.gz", ".html"};
        for (size_t i = 0; i < sizeof ext / sizeof ext[0]; i++) {
            snprintf(path, sizeof path, "%s%s", stem, ext[i]);
            if (access(path, F_OK) == 0)
                printf("  %s\n", path);
        }
        printf("open the trace at https://ui.perfetto.dev (Open trace file)\n");
    }
    sonde_summary_free(sum);
    free(stem);
    free(pl.embed);
    free(pl.w_text);
    free(pl.w_block);
    free(pl.w_out);
    free(pl.latent);
    free(pl.scratch);
    free(pl.cond);
    if (rc && !said) /* a failure said already is not said again; the exit status still tells */
        fprintf(stderr, "pipeline: sonde_destroy: %s (%s)\n", sonde_strerror(rc), sonde_last_error());
    return rc == 0 ? 0 : 1;
}

#ifndef SONDE_PIPELINE_NO_MAIN
int main(int argc, char **argv) { return sonde_pipeline_main(argc, argv); }
#endif
