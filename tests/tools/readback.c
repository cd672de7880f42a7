/* readback.c - test helper: reads a .sonde file through the model and writes one report
 * (format from the extension), the way the library and the CLI do. Prints the reader's error
 * and exits 2 on failure. Usage: readback FILE.sonde OUT.{json,csv,txt,trace.json.gz} */
#include <stdio.h>

#include "export/export.h"
#include <sonde/sonde.h>

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: readback FILE.sonde OUTPUT\n");
        return 2;
    }
    sm_model m;
    if (sm_read_file(argv[1], &m) != 0) {
        fprintf(stderr, "readback: %s\n", sonde_last_error());
        return 2;
    }
    int rc = sx_write_path(&m, argv[2]);
    if (rc)
        fprintf(stderr, "readback: %s\n", sonde_last_error());
    sm_free(&m);
    return rc ? 2 : 0;
}
