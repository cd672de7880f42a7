/* escape.c - a run whose names and metadata are hostile HTML, for the browser test. */
#include <sonde/sonde.h>

int main(int argc, char **argv)
{
    sonde_config c = sonde_config_default();
    c.output_dir = argc > 1 ? argv[1] : "./sonde-out";
    c.name = "escape";
    c.formats = SONDE_FORMAT_HTML | SONDE_FORMAT_JSON;
    sonde_profiler *p = sonde_create(&c);
    sonde_session_begin(p, "<img src=x onerror=alert(2)>");
    for (int i = 0; i < 3; i++) {
        sonde_begin(p, "<script>alert(1)</script>");
        sonde_metadata(p, "<b>key</b>", "\"quoted\" & <tag>");
        sonde_end(p);
        sonde_step(p);
    }
    sonde_session_end(p);
    return sonde_destroy(p);
}
