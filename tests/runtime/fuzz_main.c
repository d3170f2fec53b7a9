/* tests/runtime/fuzz_main.c — runs a libFuzzer target over files and
 * folders of inputs without libFuzzer (any compiler): the corpus as a
 * regression test.
 *   rt_fuzz_corpus PATH...   (a PATH may be a folder: every file in it) */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int run_file(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) {
        perror(path);
        return -1;
    }
    size_t cap = 1 << 16, n = 0;
    uint8_t *buf = malloc(cap);
    for (size_t got; buf && (got = fread(buf + n, 1, cap - n, f)) > 0;) {
        n += got;
        if (n == cap) {
            uint8_t *b = realloc(buf, cap *= 2);
            if (!b) free(buf);
            buf = b;
        }
    }
    fclose(f);
    if (!buf) {
        fprintf(stderr, "%s: out of memory\n", path);
        return -1;
    }
    LLVMFuzzerTestOneInput(buf, n);
    free(buf);
    return 0;
}

int main(int argc, char **argv) {
    int files = 0, errors = 0;
    for (int i = 1; i < argc; i++) {
        struct stat st;
        if (stat(argv[i], &st) != 0) {
            perror(argv[i]);
            errors++;
            continue;
        }
        if (!S_ISDIR(st.st_mode)) {
            errors += run_file(argv[i]) != 0;
            files++;
            continue;
        }
        DIR *d = opendir(argv[i]);
        if (!d) {
            perror(argv[i]);
            errors++;
            continue;
        }
        for (struct dirent *e; (e = readdir(d)) != NULL;) {
            if (e->d_name[0] == '.') continue;
            char p[4096];
            snprintf(p, sizeof p, "%s/%s", argv[i], e->d_name);
            errors += run_file(p) != 0;
            files++;
        }
        closedir(d);
    }
    printf("%d passed, %d failed\n", files - errors, errors);
    return errors || files == 0 ? 1 : 0; /* an empty corpus tests nothing */
}
