/* sonde_main.c - the sonde executable: the command of main.c. */
#include "cli.h"

int main(int argc, char **argv)
{
    return sonde_cli_main(argc, argv);
}
