/* replay: runs a fuzz target's LLVMFuzzerTestOneInput once over files, so
 * the seed corpus and every saved crashing input are checked by
 * `meson test` with any compiler, without libFuzzer.
 *
 * usage: replay_<name> FILE_OR_DIR...   (a directory: each file in it)
 * Exit 0 when every input ran; a crash or failed check ends the process. */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int run_file(const char *path)
{
    FILE *f = fopen(path, "rb");
    uint8_t *buf = NULL;
    size_t len = 0, cap = 0, got;

    if (!f) {
        perror(path);
        return -1;
    }
    do {
        if (len == cap) {
            uint8_t *nb = realloc(buf, cap = cap ? 2 * cap : 4096);
            if (!nb) {
                fclose(f);
                free(buf);
                return -1;
            }
            buf = nb;
        }
        got = fread(buf + len, 1, cap - len, f);
        len += got;
    } while (got > 0);
    fclose(f);
    /* An exact-size copy, so reading past the end is caught by ASan. */
    uint8_t *exact = malloc(len ? len : 1);
    if (!exact) {
        free(buf);
        return -1;
    }
    memcpy(exact, buf, len);
    free(buf);
    fprintf(stderr, "replay %s (%zu bytes)\n", path, len);
    LLVMFuzzerTestOneInput(exact, len);
    free(exact);
    return 0;
}

int main(int argc, char **argv)
{
    int runs = 0;

    for (int i = 1; i < argc; i++) {
        struct stat st;
        if (stat(argv[i], &st) != 0) {
            perror(argv[i]);
            return 2;
        }
        if (!S_ISDIR(st.st_mode)) {
            if (run_file(argv[i]) != 0)
                return 2;
            runs++;
            continue;
        }
        DIR *d = opendir(argv[i]);
        struct dirent *e;
        if (!d) {
            perror(argv[i]);
            return 2;
        }
        while ((e = readdir(d)) != NULL) {
            char path[4096];
            if (e->d_name[0] == '.')
                continue; /* also skips .gitkeep */
            snprintf(path, sizeof path, "%s/%s", argv[i], e->d_name);
            if (run_file(path) != 0) {
                closedir(d);
                return 2;
            }
            runs++;
        }
        closedir(d);
    }
    printf("replayed %d inputs\n", runs);
    return runs > 0 ? 0 : 3;
}
