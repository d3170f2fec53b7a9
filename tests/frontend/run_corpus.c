/* tests/frontend/run_corpus.c — runs the fuzz target (tests/fuzz/fuzz_model.c)
 * once on every file of the given folders: the seed corpus, the examples and
 * the error files.  Built with any compiler, so the corpus is a regression
 * test even where libFuzzer is missing; a crash fails the test.
 *
 *   test_fe_corpus DIR...
 */
#include "ir.h"

#include <dirent.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int main(int argc, char **argv) {
    int n = 0;
    for (int i = 1; i < argc; i++) {
        DIR *dir = opendir(argv[i]);
        if (!dir) {
            printf("FAIL: cannot open %s\n", argv[i]);
            return 1;
        }
        for (struct dirent *de; (de = readdir(dir));) {
            if (de->d_name[0] == '.') continue;
            size_t len = strlen(de->d_name);
            if (len > 9 && strcmp(de->d_name + len - 9, ".expected") == 0) continue;
            char path[4096];
            snprintf(path, sizeof path, "%s/%s", argv[i], de->d_name);
            size_t size = 0;
            char *data = read_file(path, &size);
            if (!data) continue; /* a folder */
            LLVMFuzzerTestOneInput((const uint8_t *)data, size);
            free(data);
            n++;
        }
        closedir(dir);
    }
    printf("ran %d inputs\n", n);
    return n > 0 ? 0 : 1;
}
