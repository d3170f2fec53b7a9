/* tests/frontend/test_errors.c — golden tests of the front end's error
 * messages.
 *
 * Every tests/frontend/errors/NAME.model is a broken program.  It is loaded
 * with fe_load_file into a Diag that writes to memory; the load must fail,
 * and the messages must equal NAME.expected byte for byte.  A first line
 * "# args: -D k=v ..." passes -D overrides.  Run from the source root
 * (CTest does), so the paths in the messages are relative.
 *
 *   test_fe_errors                 check every file
 *   test_fe_errors FILE.model...   check only these
 *   TRAINC_UPDATE_GOLDEN=1 test_fe_errors   rewrite the .expected files
 */
#include "ir.h"

#include <dirent.h>
#include <stdlib.h>
#include <string.h>

#define ERR_DIR "tests/frontend/errors"

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* Parses "# args: -D k=v -D k=v" on the first line into defs (pointing into buf). */
static int parse_args(char *text, Define *defs, int max) {
    int n = 0;
    if (strncmp(text, "# args:", 7) != 0) return 0;
    char *eol = strchr(text, '\n');
    if (eol) *eol = 0;
    for (char *tok = strtok(text + 7, " "); tok && n < max; tok = strtok(NULL, " ")) {
        if (strcmp(tok, "-D") == 0) continue;
        char *eq = strchr(tok, '=');
        if (!eq) continue;
        *eq = 0;
        defs[n++] = (Define){tok, eq + 1};
    }
    return n;
}

static bool check_file(const char *path, bool update) {
    char *text = read_file(path, NULL);
    if (!text) {
        printf("FAIL %s: cannot read\n", path);
        return false;
    }
    Define defs[16];
    int ndefs = parse_args(text, defs, 16);
    char *out = NULL;
    size_t outlen = 0;
    FILE *mem = open_memstream(&out, &outlen);
    Diag d;
    diag_init(&d, mem);
    Graph *g = fe_load_file(path, defs, ndefs, &d);
    fclose(mem);
    bool ok = true;
    if (g || d.nerrors == 0) {
        printf("FAIL %s: loaded without errors\n", path);
        ok = false;
    }
    ir_graph_free(g);
    diag_free(&d);
    char exp_path[1024];
    snprintf(exp_path, sizeof exp_path, "%.*s.expected", (int)(strlen(path) - strlen(".model")), path);
    if (update) {
        FILE *f = fopen(exp_path, "wb");
        if (!f || fwrite(out, 1, outlen, f) != outlen) ok = false;
        if (f) fclose(f);
        printf("%s %s\n", ok ? "wrote" : "FAIL writing", exp_path);
    } else {
        size_t elen = 0;
        char *expected = read_file(exp_path, &elen);
        if (!expected) {
            printf("FAIL %s: no %s (run with TRAINC_UPDATE_GOLDEN=1)\n", path, exp_path);
            ok = false;
        } else if (elen != outlen || memcmp(expected, out, outlen) != 0) {
            printf("FAIL %s: the messages differ from %s\n--- expected\n%s--- got\n%s---\n", path, exp_path, expected, out);
            ok = false;
        }
        free(expected);
    }
    free(out);
    free(text);
    return ok;
}

int main(int argc, char **argv) {
    bool update = getenv("TRAINC_UPDATE_GOLDEN") && *getenv("TRAINC_UPDATE_GOLDEN") && strcmp(getenv("TRAINC_UPDATE_GOLDEN"), "0") != 0;
    int nfail = 0, n = 0;
    if (argc > 1) {
        for (int i = 1; i < argc; i++, n++) nfail += !check_file(argv[i], update);
    } else {
        DIR *dir = opendir(ERR_DIR);
        if (!dir) {
            printf("FAIL: cannot open %s (run from the source root)\n", ERR_DIR);
            return 1;
        }
        char **names = NULL;
        int cap = 0;
        for (struct dirent *de; (de = readdir(dir));) {
            size_t len = strlen(de->d_name);
            if (len < 7 || strcmp(de->d_name + len - 6, ".model") != 0) continue;
            if (n == cap) names = realloc(names, sizeof(char *) * (size_t)(cap = cap ? 2 * cap : 64));
            names[n] = malloc(len + sizeof ERR_DIR + 1);
            sprintf(names[n++], "%s/%s", ERR_DIR, de->d_name);
        }
        closedir(dir);
        qsort(names, (size_t)n, sizeof *names, cmp_str);
        for (int i = 0; i < n; i++) {
            nfail += !check_file(names[i], update);
            free(names[i]);
        }
        free(names);
        if (n < 25) {
            printf("FAIL: only %d error files in %s\n", n, ERR_DIR);
            nfail++;
        }
    }
    printf("%d files, %d failed\n", n, nfail);
    return nfail ? 1 : 0;
}
