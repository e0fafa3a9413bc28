/* An independent simulation of the blackjack dealer's hand, to cross-check sabot's exact analysis
 * (host_tools/sabot/game/blackjack_analyze.py): written from the rule, sharing no code with it.
 *
 *   simulate_dealer RULE HANDS SEED C1 C2 ... C10
 *
 * RULE is s17 (stand on every 17) or h17 (draw to a soft 17); C1..C10 the cards of each value in
 * the shoe (ace, 2, ..., 9, then ten/jack/queen/king together). Each hand draws the dealer's
 * cards at random without replacement from the whole composition (a partial Fisher-Yates shuffle
 * of the shoe: the array stays a permutation, so each hand starts from the same composition) and
 * completes it: a Blackjack (an ace and a ten-value card as the first two) stops at two cards;
 * otherwise the dealer draws below 17 (and on a soft 17 under h17), the busting card counted.
 * Prints one line: blackjacks, then hands ending with 2, 3, ..., 7 and 8 or more cards. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static uint64_t state;

static uint64_t next(void) { /* xorshift64* */
    state ^= state >> 12;
    state ^= state << 25;
    state ^= state >> 27;
    return state * 0x2545F4914F6CDD1DULL;
}

int main(int argc, char **argv) {
    if (argc != 14) {
        fprintf(stderr, "usage: simulate_dealer s17|h17 HANDS SEED C1..C10\n");
        return 2;
    }
    int h17 = strcmp(argv[1], "h17") == 0;
    long hands = atol(argv[2]);
    state = strtoull(argv[3], NULL, 10) * 2654435761ULL + 1;
    static int shoe[4096];
    int n = 0;
    for (int v = 1; v <= 10; v++)
        for (int c = atoi(argv[3 + v]); c > 0; c--)
            shoe[n++] = v;
    long blackjacks = 0, by_cards[9] = {0};
    for (long h = 0; h < hands; h++) {
        int hard = 0, aces = 0, k = 0, total;
        for (;;) {
            int j = k + (int)(next() % (uint64_t)(n - k));
            int t = shoe[k];
            shoe[k] = shoe[j];
            shoe[j] = t;
            int v = shoe[k++];
            hard += v;
            aces += v == 1;
            if (k < 2)
                continue;
            if (k == 2 && aces == 1 && hard == 11) {
                blackjacks++;
                break;
            }
            int soft = aces && hard + 10 <= 21;
            total = soft ? hard + 10 : hard;
            if (total > 21 || total > 17 || (total == 17 && !(soft && h17)))
                break;
        }
        by_cards[k < 8 ? k : 8]++;
    }
    printf("%ld", blackjacks);
    for (int k = 2; k <= 8; k++)
        printf(" %ld", by_cards[k]);
    printf("\n");
    return 0;
}
