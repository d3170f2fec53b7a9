/* tests/ir/run_corpus_ir.c — runs the IR fuzz target (tests/fuzz/fuzz_ir.c)
 * once on every file under the given folders (recursively): the seed corpus
 * with its kept crash inputs, and the .ir test files.  Built with any
 * compiler, so the corpus is a regression test where libFuzzer is missing;
 * a crash or a broken property aborts and fails the test.
 *
 *   test_ir_corpus DIR...
 */
#include "ir.h"

#include <dirent.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int walk(const char *dir) {
    DIR *d = opendir(dir);
    if (!d) {
        printf("FAIL: cannot open %s\n", dir);
        exit(1);
    }
    int n = 0;
    for (struct dirent *de; (de = readdir(d));) {
        if (de->d_name[0] == '.') continue;
        char path[4096];
        snprintf(path, sizeof path, "%s/%s", dir, de->d_name);
        struct stat st;
        if (stat(path, &st) != 0) continue;
        if (S_ISDIR(st.st_mode)) {
            n += walk(path);
            continue;
        }
        size_t size = 0;
        char *data = read_file(path, &size);
        if (!data) continue;
        LLVMFuzzerTestOneInput((const uint8_t *)data, size);
        free(data);
        n++;
    }
    closedir(d);
    return n;
}

int main(int argc, char **argv) {
    int n = 0;
    for (int i = 1; i < argc; i++) n += walk(argv[i]);
    printf("ran %d inputs\n", n);
    return n > 0 ? 0 : 1;
}
