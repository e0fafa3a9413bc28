/* The yardstick `make bench` times `sabot analyze` against (bench/bench.py, section analyze): the
 * plain recursive enumeration of bench.py's baseline_rank_enumeration, in C. Every ordered
 * deal of the six cards P1 B1 P2 B2 P3 B3 over 13 ranks, weighted by how many cards of each rank
 * are left, undealt cards counted as analyze counts them. Prints the Banker / Player / Tie counts
 * and the calculation's time: `enumerate_bpt DECKS`. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static const int value[13] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 0, 0, 0, 0};
static int64_t counts[13];
static __int128 banker, player, tie;

static void finish(int p, int b, __int128 weight)
{
    if (p > b)
        player += weight;
    else if (b > p)
        banker += weight;
    else
        tie += weight;
}

static int draws(int b, int third) /* the Banker's rule, third = -1 when the Player stood */
{
    if (third < 0)
        return b <= 5;
    if (b <= 2)
        return 1;
    if (b == 3)
        return third != 8;
    if (b == 4)
        return third >= 2 && third <= 7;
    if (b == 5)
        return third >= 4 && third <= 7;
    if (b == 6)
        return third == 6 || third == 7;
    return 0;
}

/* cards dealt so far: the two-card totals, the Player's third card's value or -1 */
static void deal(int dealt, int p, int b, int third, __int128 weight, int64_t n)
{
    if (dealt < 4) {
        for (int r = 0; r < 13; r++) {
            if (!counts[r])
                continue;
            int64_t w = counts[r]--;
            if (dealt % 2 == 0)
                deal(dealt + 1, (p + value[r]) % 10, b, third, weight * w, n - 1);
            else
                deal(dealt + 1, p, (b + value[r]) % 10, third, weight * w, n - 1);
            counts[r]++;
        }
        return;
    }
    if (dealt == 4) {
        if (p >= 8 || b >= 8) {
            finish(p, b, weight * n * (n - 1));
            return;
        }
        if (p <= 5) {
            for (int r = 0; r < 13; r++) {
                if (!counts[r])
                    continue;
                int64_t w = counts[r]--;
                deal(5, (p + value[r]) % 10, b, value[r], weight * w, n - 1);
                counts[r]++;
            }
            return;
        }
        if (draws(b, -1)) {
            for (int r = 0; r < 13; r++)
                if (counts[r])
                    finish(p, (b + value[r]) % 10, weight * counts[r] * (n - 1));
            return;
        }
        finish(p, b, weight * n * (n - 1));
        return;
    }
    /* the Player has three cards, the Banker two */
    if (draws(b, third)) {
        for (int r = 0; r < 13; r++)
            if (counts[r])
                finish(p, (b + value[r]) % 10, weight * counts[r]);
        return;
    }
    finish(p, b, weight * n);
}

static void print128(const char *name, __int128 x)
{
    char buf[48];
    int i = 47;
    buf[i] = 0;
    do {
        buf[--i] = (char)('0' + (int)(x % 10));
        x /= 10;
    } while (x);
    printf("%s %s\n", name, buf + i);
}

int main(int argc, char **argv)
{
    int decks = argc > 1 ? atoi(argv[1]) : 8;
    for (int r = 0; r < 13; r++)
        counts[r] = 4 * decks;
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    deal(0, 0, 0, -1, 1, 52 * decks);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    print128("banker", banker);
    print128("player", player);
    print128("tie", tie);
    printf("seconds %.9f\n", (double)(t1.tv_sec - t0.tv_sec) + (t1.tv_nsec - t0.tv_nsec) / 1e9);
    return 0;
}
