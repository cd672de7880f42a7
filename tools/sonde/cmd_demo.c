/* cmd_demo.c - `sonde demo`: the demo pipeline of examples/pipeline.c, built into the command. */
#include "cli.h"

int sonde_pipeline_main(int argc, char **argv);

int cmd_demo(int argc, char **argv) { return sonde_pipeline_main(argc, argv); }
