/* formats.h - the report formats, the one list of them. Each row is
 *
 *   X(name, bit, ext, kind, writer)
 *
 * name   as users write it: the values of the key `formats` and of `sonde export --format`
 * bit    its SONDE_FORMAT_* bit (include/sonde/sonde.h, the public API)
 * ext    the file it writes, NAME + ext
 * kind   how export/ writes it: TEXT (made in memory by a text writer over the report), STREAM
 *        (written as it is made by a stream writer over the model), FILE (a writer that makes
 *        the file at a path itself: the SQLite database), TRACE (the gzip'd Chrome trace),
 *        TENSORBOARD (that trace where TensorBoard looks for it); the last two have no writer of
 *        their own in the table (NULL)
 * writer the export/ function that writes it (a name that only export.c's expansion uses)
 *
 * in the order users are told them. The key table's help and errors, the parser of `formats`,
 * `sonde export`'s usage and unknown-extension error, the exporter's table (export.c) and the
 * golden check (tests/golden/check.sh reads the extensions from here) all come from it: adding a
 * format is a row here and its writer in export/. */
#ifndef SONDE_FORMATS_H
#define SONDE_FORMATS_H

#define SONDE__FORMATS_ROWS(X)                                                                 \
    X(json, SONDE_FORMAT_JSON, ".json", TEXT, sx_json_report)                                 \
    X(csv, SONDE_FORMAT_CSV, ".csv", TEXT, csv_report)                                        \
    X(txt, SONDE_FORMAT_TXT, ".txt", TEXT, sx_txt_report)                                     \
    X(trace, SONDE_FORMAT_TRACE, ".trace.json.gz", TRACE, NULL)                                \
    X(html, SONDE_FORMAT_HTML, ".html", TEXT, sx_html_report)                                 \
    X(samples, SONDE_FORMAT_SAMPLES, ".samples.csv", TEXT, samples_report)                    \
    X(tensorboard, SONDE_FORMAT_TENSORBOARD, ".pt.trace.json.gz", TENSORBOARD, NULL)           \
    X(perfetto, SONDE_FORMAT_PERFETTO, ".pftrace", STREAM, sx_perfetto)                       \
    X(folded, SONDE_FORMAT_FOLDED, ".folded", STREAM, sx_folded_stream)                       \
    X(pprof, SONDE_FORMAT_PPROF, ".pb.gz", STREAM, sx_pprof_stream)                           \
    X(offcpu, SONDE_FORMAT_OFFCPU, ".offcpu.folded", STREAM, sx_offcpu_folded_stream)         \
    X(instances, SONDE_FORMAT_INSTANCES, ".instances.csv", STREAM, sx_csv_instances_stream) \
    X(sqlite, SONDE_FORMAT_SQLITE, ".sqlite", FILE, sx_sqlite_file)

#endif
