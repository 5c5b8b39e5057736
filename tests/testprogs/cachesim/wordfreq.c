// Word lengths and letter counts of its standard input, like a small
// filter: it waits for input, then works through what arrives and exits.
#include <ctype.h>
#include <stdio.h>
#include <string.h>
#define MAX_LEN 64
static unsigned long by_length[MAX_LEN + 1];
static unsigned long by_letter[26];
int main(void) {
  char line[4096];
  unsigned long words = 0;
  while (fgets(line, sizeof line, stdin)) {
    size_t len = 0;
    for (const char *p = line;; p++) {
      if (isalpha((unsigned char)*p)) {
        by_letter[tolower((unsigned char)*p) - 'a']++;
        len++;
        continue;
      }
      if (len) {
        by_length[len < MAX_LEN ? len : MAX_LEN]++;
        words++;
        len = 0;
      }
      if (!*p) break;
    }
  }
  size_t longest = 0;
  for (size_t i = 0; i <= MAX_LEN; i++) if (by_length[i]) longest = i;
  int top = 0;
  for (int i = 1; i < 26; i++) if (by_letter[i] > by_letter[top]) top = i;
  printf("words %lu longest %zu most common letter %c\n", words, longest, 'a' + top);
  return 0;
}
