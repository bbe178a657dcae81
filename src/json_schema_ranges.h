/* json_schema_ranges.h — grammar text for the numbers in a range, as json_schema.c needs
 * them for integer and number bounds (and ipv4's octets).
 *
 * A range becomes alternatives over digit strings, one set per length. Between two digit
 * strings of one length the integers form a prefix tree: a shared first digit as a literal
 * and the rest recursively; otherwise the low bound's first digit followed by anything from
 * the rest of the low bound up, the digits strictly between as a [a-b] class followed by
 * any digits, and the high bound's first digit followed by anything up to the rest of the
 * high bound. Decimals do the same digit by digit on the fraction, "tight" to a bound while
 * the digits so far equal its digits. No leading zeros and no exponent, and nothing
 * outside the range can be written.
 *
 * Bounded decimals keep at most TOKD_RANGE_FRAC_DIGITS fraction digits and stay below
 * 1e9 (15 significant digits: the decimal comparison and the double one agree). */
#ifndef TOKD_JSON_SCHEMA_RANGES_H
#define TOKD_JSON_SCHEMA_RANGES_H

#include <stdbool.h>
#include <stdint.h>

#include "util.h"

#define TOKD_RANGE_INT_MAX 999999999LL /* bounded numbers: 9 integer digits ... */
#define TOKD_RANGE_FRAC_DIGITS 6       /* ... and 6 fraction digits */

/* A non-negative decimal below 1e9 with at most 6 fraction digits (no trailing zeros). */
typedef struct {
    int64_t ip;
    char fr[TOKD_RANGE_FRAC_DIGITS + 1];
} tokd_range_decimal;

/* Appends the non-negative integers in [lo, hi] (hi < 0: unbounded, up to 16 digits), no
 * leading zeros, as alternatives. */
void tokd_range_int(tokd_buf *b, int64_t lo, int64_t hi);
/* |v| as a decimal; false when it is 1e9 or more or needs more than 6 decimals. */
bool tokd_range_to_dec(double v, tokd_range_decimal *d);
/* <0, 0, >0 as a is below, equal to or above b. */
int tokd_range_dec_cmp(const tokd_range_decimal *a, const tokd_range_decimal *b);
/* Appends alternatives (joined by " | ") for the non-negative decimals from lo (above it if
 * ls) to hi (below it if hs; NULL: below 1e9); returns how many (0: none fits). */
int tokd_range_dec(tokd_buf *b, const tokd_range_decimal *lo, bool ls, const tokd_range_decimal *hi, bool hs);

#endif
