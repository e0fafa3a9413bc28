/* The outcome counts of edges.RemainingShoe.outcome_counts in C: the same integers, the same
 * closed form (game/analyze.py's docstring), about 60 times faster. Built by the Makefile into
 * _outcomes.so beside this file and loaded by edges.py with ctypes; without it edges.py counts in
 * Python.
 *
 * This file holds arithmetic only. What it counts comes from Python once, at load
 * (sabot_outcomes_init): the 715 classes of first four cards (analyze.first_four_classes), how
 * their orderings split over two-card totals, and the drawing rule (rules.player_draws,
 * rules.banker_draws) as tables. So the rules stay in game/rules.py, and a change there reaches
 * this kernel without touching it.
 *
 * Exact in 64 bits: with at most 416 cards every count below is under 2**63 (a class weight is
 * below 416**4 < 2**35, S2 below 16 * 416**4 < 2**39, a cell's sequences below
 * falling(416, 6) < 2**53); edges.py refuses a bigger shoe. The expected returns are summed in 128
 * bits (|count| * |return| < 2**53 * 2**63) and handed back as a high and a low 64-bit half.
 * No state is written after init: threads may count at once (the scratch is on each call's stack).
 * 21 Baccarat's sum (sabot_b21_wins) is in doubles, as its analysis is in Python.
 */
#include <stdint.h>
#include <string.h>

#define MAX_CLASSES 715
#define MAX_ENTRIES 4096
#define MAX_MOMENTS 16384
#define CELLS 64      /* non-natural two-card totals: p2 * 8 + b2 */
#define FIELDS 111    /* S0, S1[v] at 1 + v, S2[v][w] at 11 + 10 v + w */
#define OUTCOMES 400  /* kind * 100 + player_total * 10 + banker_total */
#define K23 100
#define K32 200
#define K33 300

static int n_classes, n_grouped, n_natural;
static int32_t class_parts[MAX_CLASSES][4][2];  /* (value, multiplicity), multiplicity 0: none */
static int32_t natural[MAX_ENTRIES][3];         /* (class, outcome index, orderings) */
/* (class, cell, orderings, first moment, moments): a class's orderings in a non-natural cell,
 * with the S1 and S2 fields it adds to, each (field, multiplicity or product of two), only those
 * the cell's drawing reads */
static int32_t grouped[MAX_ENTRIES][5];
static int32_t moments[MAX_MOMENTS][2];
static int32_t player_draws[8], banker_stands_draws[8], banker_draws[8][10];

/* classes: the multisets of first four values, each as four (value, multiplicity) pairs,
 * multiplicity 0 for none; splits: (class, p2, b2, orderings), how many distinct orderings of a
 * class give the two-card totals p2 and b2; rules: player_draws[p2] for p2 0..7,
 * banker_draws[b2] when the Player stood for b2 0..7, banker_draws[b2][v] for b2 0..7 and the
 * Player's third card's value v. */
int sabot_outcomes_init(int classes, const int32_t *parts, int nsplits, const int32_t *splits,
                        const int32_t *rules)
{
    if (classes > MAX_CLASSES)
        return -1;
    memcpy(class_parts, parts, sizeof(int32_t) * 8 * (size_t)classes);
    memcpy(player_draws, rules, sizeof player_draws);
    memcpy(banker_stands_draws, rules + 8, sizeof banker_stands_draws);
    memcpy(banker_draws, rules + 16, sizeof banker_draws);
    int nm = 0, ng = 0, nn = 0;
    for (int e = 0; e < nsplits; e++) {
        const int32_t *x = splits + 4 * e;
        int i = x[0], p2 = x[1], b2 = x[2];
        if (i < 0 || i >= classes || p2 < 0 || p2 > 9 || b2 < 0 || b2 > 9)
            return -1;
        if (p2 >= 8 || b2 >= 8) { /* a natural: no third card */
            if (nn == MAX_ENTRIES)
                return -1;
            natural[nn][0] = i;
            natural[nn][1] = 10 * p2 + b2;
            natural[nn++][2] = x[3];
            continue;
        }
        if (ng == MAX_ENTRIES)
            return -1;
        int32_t *g = grouped[ng++];
        g[0] = i;
        g[1] = p2 * 8 + b2;
        g[2] = x[3];
        g[3] = nm;
        int32_t (*part)[2] = class_parts[i];
        int s1 = player_draws[p2] || banker_stands_draws[b2];
        for (int j = 0; j < 4 && part[j][1]; j++) {
            if (nm + 5 > MAX_MOMENTS)
                return -1;
            int v = part[j][0];
            if (s1) {
                moments[nm][0] = 1 + v;
                moments[nm++][1] = part[j][1];
            }
            if (!player_draws[p2] || !banker_draws[b2][v])
                continue;
            for (int l = 0; l < 4 && part[l][1]; l++) {
                moments[nm][0] = 11 + 10 * v + part[l][0];
                moments[nm++][1] = part[j][1] * part[l][1];
            }
        }
        g[4] = nm - g[3];
    }
    n_classes = classes;
    n_grouped = ng;
    n_natural = nn;
    return 0;
}

static int64_t falling(int64_t n, int k)
{
    int64_t r = 1;
    for (int i = 0; i < k; i++)
        r *= n - i;
    return r;
}

void sabot_returns(const int64_t *out, int nw, const int64_t *ret, int64_t *hi, uint64_t *lo);

/* c: the ten value counts; out: the 400 outcome counts; then sabot_returns of nw wagers (0:
 * none). Returns the number of sequences counted (falling(n, 6) when all is well). */
int64_t sabot_outcomes(const int64_t *c, int64_t *out, int nw, const int64_t *ret, int64_t *hi,
                       uint64_t *lo)
{
    int64_t fall[10][5], weight[MAX_CLASSES], nat[100];
    int64_t acc[CELLS][FIELDS];
    int64_t n = 0;
    for (int v = 0; v < 10; v++) {
        n += c[v];
        for (int m = 0; m < 5; m++)
            fall[v][m] = falling(c[v], m);
    }
    int64_t ff2 = (n - 4) * (n - 5), ff1 = n - 5;
    for (int i = 0; i < n_classes; i++) {
        int64_t w = 1;
        for (int j = 0; j < 4 && class_parts[i][j][1]; j++)
            w *= fall[class_parts[i][j][0]][class_parts[i][j][1]];
        weight[i] = w;
    }
    memset(out, 0, sizeof(int64_t) * OUTCOMES);
    memset(nat, 0, sizeof nat);
    memset(acc, 0, sizeof acc);
    for (int e = 0; e < n_natural; e++)
        nat[natural[e][1]] += natural[e][2] * weight[natural[e][0]];
    for (int k = 0; k < 100; k++)
        out[k] += nat[k] * ff2;
    for (int e = 0; e < n_grouped; e++) {
        int64_t t = grouped[e][2] * weight[grouped[e][0]];
        if (!t)
            continue;
        int64_t *a = acc[grouped[e][1]];
        a[0] += t;
        const int32_t (*m)[2] = moments + grouped[e][3];
        for (int j = grouped[e][4]; j > 0; j--, m++)
            a[(*m)[0]] += t * (*m)[1];
    }
    /* (3,3): per (pt, b2) a row over the Banker's third card w, turned to banker totals
     * (b2 + w) % 10 at the end */
    int64_t rows33[100][10];
    memset(rows33, 0, sizeof rows33);
    for (int cell = 0; cell < CELLS; cell++) {
        int64_t *a = acc[cell];
        int64_t s0 = a[0];
        if (!s0)
            continue;
        int p2 = cell / 8, b2 = cell % 8;
        int64_t left[10]; /* c_w * S0 - S1[w]: with the first four out, the w left, summed */
        for (int w = 0; w < 10; w++)
            left[w] = c[w] * s0 - a[1 + w];
        if (!player_draws[p2]) {
            if (banker_stands_draws[b2]) {
                for (int w = 0; w < 10; w++)
                    out[K23 + 10 * p2 + (b2 + w) % 10] += left[w] * ff1;
            } else {
                out[10 * p2 + b2] += s0 * ff2;
            }
            continue;
        }
        for (int v = 0; v < 10; v++) {
            int pt = (p2 + v) % 10;
            int64_t cv = c[v], s1v = a[1 + v];
            if (!banker_draws[b2][v]) {
                out[K32 + 10 * pt + b2] += left[v] * ff1;
                continue;
            }
            /* sum over the first four of (c_v - k_v)(c_w - k_w - [v = w]) */
            int64_t *row = rows33[10 * pt + b2];
            const int64_t *s2 = a + 11 + 10 * v;
            for (int w = 0; w < 10; w++)
                row[w] += cv * left[w] - c[w] * s1v + s2[w];
            row[v] -= left[v];
        }
    }
    for (int i = 0; i < 100; i++) {
        int pt = i / 10, b2 = i % 10;
        for (int w = 0; w < 10; w++)
            out[K33 + 10 * pt + (b2 + w) % 10] += rows33[i][w];
    }
    int64_t total = 0;
    for (int k = 0; k < OUTCOMES; k++)
        total += out[k];
    sabot_returns(out, nw, ret, hi, lo);
    return total;
}

/* For each of nw wagers, its row of 400 net returns (times a common denominator) in ret:
 * sum(out * row), in 128 bits, into hi (the high half, signed) and lo. */
void sabot_returns(const int64_t *out, int nw, const int64_t *ret, int64_t *hi, uint64_t *lo)
{
    for (int x = 0; x < nw; x++) {
        const int64_t *row = ret + (size_t)x * OUTCOMES;
        __int128 sum = 0;
        for (int k = 0; k < OUTCOMES; k++)
            sum += (__int128)out[k] * row[k];
        hi[x] = (int64_t)(sum >> 64);
        lo[x] = (uint64_t)sum;
    }
}

/* The CRC-32 of the outcomes.c this was built from (the Makefile passes it): edges.py uses the
 * kernel only when it equals that of the file beside it, so an edited source is never run by a
 * stale build. */
#ifndef SOURCE_CRC
#define SOURCE_CRC 0u
#endif
/* 21 Baccarat (game/baccarat21_analyze.py outcomes): each winner's chance for a composition,
 * summed over every Player's and Banker's final multiset of card values that Python enumerated
 * once for the table's rules (their sequences counted in `ways`). A pair's chance is
 * ways_p ways_b prod_v falling(c_v, p_v + b_v) / falling(N, |p| + |b|), in doubles, as the Python
 * sum (the same to rounding). Player multisets are dense, ten counts each; each chooses its group
 * of Banker multisets (the Banker's rule: one group, or one per Player total it chases); a Banker
 * multiset is sparse, (value, count) entries. wins: Player, Banker, Tie. -1: a size out of
 * bounds. */
#define B21_VALUES 10
#define B21_MOST_OF_A_VALUE 128 /* ten-value cards of eight decks */
#define B21_MOST_CARDS 23       /* a round's cards, and one */
int sabot_b21_wins(const int32_t *counts, int32_t n_player, const int8_t *player,
                   const double *player_ways, const int32_t *player_total,
                   const int32_t *player_group, const int32_t *group_start,
                   const int32_t *entry_start, const int8_t *entries, const double *banker_ways,
                   const int32_t *banker_total, const int32_t *banker_len, const int8_t *winner,
                   double *wins)
{
    static const int most = B21_MOST_CARDS;
    double f[B21_MOST_OF_A_VALUE + 1][B21_MOST_CARDS];
    int n_all = 0;
    for (int v = 0; v < B21_VALUES; v++) {
        if (counts[v] < 0 || counts[v] > B21_MOST_OF_A_VALUE)
            return -1;
        n_all += counts[v];
    }
    for (int c = 0; c <= B21_MOST_OF_A_VALUE; c++) {
        f[c][0] = 1.0;
        for (int k = 1; k < most; k++)
            f[c][k] = f[c][k - 1] * (c - k + 1 > 0 ? c - k + 1 : 0);
    }
    wins[0] = wins[1] = wins[2] = 0.0;
    for (int a = 0; a < n_player; a++) {
        const int8_t *pk = player + B21_VALUES * a;
        int left[B21_VALUES], held = 0;
        double pp = player_ways[a];
        for (int v = 0; v < B21_VALUES; v++) {
            if (pk[v] < 0 || pk[v] >= most)
                return -1;
            left[v] = counts[v] - pk[v];
            held += pk[v];
            pp *= f[counts[v]][pk[v]];
        }
        if (pp == 0.0 || held >= most || held > n_all)
            continue;
        double den = 1.0, rest[B21_MOST_CARDS];  /* falling(N - held, k) */
        for (int k = 0; k < most; k++) {
            rest[k] = den;
            den *= n_all - held - k > 0 ? n_all - held - k : 0;
        }
        double p_all = 1.0;
        for (int k = 0; k < held; k++)
            p_all *= n_all - k;
        pp /= p_all;
        const int8_t *won = winner + 32 * (player_total[a] < 32 ? player_total[a] : 31);
        double sum[3] = {0.0, 0.0, 0.0};
        const double *row[B21_VALUES];  /* falling(left_v, k): 0 for k > left_v */
        for (int v = 0; v < B21_VALUES; v++)
            row[v] = f[left[v] > 0 ? left[v] : 0];
        int g = player_group[a];
        for (int b = group_start[g]; b < group_start[g + 1]; b++) {
            double w = banker_ways[b];
            for (int e = entry_start[b]; e < entry_start[b + 1] && w != 0.0; e++) {
                unsigned v = (uint8_t)entries[2 * e], k = (uint8_t)entries[2 * e + 1];
                if (v >= B21_VALUES || k >= (unsigned)most)
                    return -1;
                w *= row[v][k];
            }
            int len = banker_len[b];
            if (w == 0.0 || len < 0 || len >= most || rest[len] == 0.0)
                continue;
            int t = banker_total[b] < 32 ? banker_total[b] : 31;
            sum[won[t] - 1] += w / rest[len];
        }
        for (int i = 0; i < 3; i++)
            wins[i] += pp * sum[i];
    }
    return 0;
}

uint32_t sabot_outcomes_source_crc(void)
{
    return SOURCE_CRC;
}
