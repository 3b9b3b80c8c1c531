"""Java's text forms of values, as Kafka's tools print them: Float.toString and
Double.toString (the shortest decimal that reads back, JDK 19+), and
UUID.fromString's lenient parse."""

from __future__ import annotations

import math
import string
import unicodedata
import uuid
from fractions import Fraction

# IEEE 754 binary32 and binary64: (significand bits stored, exponent bits).
FLOAT = (23, 8)
DOUBLE = (52, 11)


def _ieee_value(magnitude: int, layout: tuple[int, int]) -> Fraction:
    """The exact value of a non-negative bit pattern (the all-ones exponent with
    a zero significand, infinity, comes out as the power of two after the
    largest finite value: where rounding to infinity starts)."""
    mant_bits, exp_bits = layout
    bias = (1 << (exp_bits - 1)) - 1
    exponent, mant = magnitude >> mant_bits, magnitude & ((1 << mant_bits) - 1)
    if exponent:
        mant |= 1 << mant_bits
    else:
        exponent = 1
    shift = exponent - bias - mant_bits
    return Fraction(mant << shift) if shift >= 0 else Fraction(mant, 1 << -shift)


def java_to_string(bits: int, layout: tuple[int, int]) -> str:
    """Java's Float.toString / Double.toString (as specified since JDK 19) of
    the value with these IEEE bits: the shortest decimal that rounds to it
    (with ties to even), the closest to it of those (a one-digit result is
    compared with the two-digit ones: Double.MIN_VALUE is 4.9E-324), printed
    as 123.45 for 10^-3 <= |v| < 10^7 and as 1.2345E-5 otherwise."""
    mant_bits, exp_bits = layout
    sign = "-" if bits >> (mant_bits + exp_bits) else ""
    magnitude = bits & ((1 << (mant_bits + exp_bits)) - 1)
    if magnitude >> mant_bits == (1 << exp_bits) - 1:
        return "NaN" if magnitude & ((1 << mant_bits) - 1) else sign + "Infinity"
    if magnitude == 0:
        return sign + "0.0"
    x = _ieee_value(magnitude, layout)
    # Every decimal strictly between these rounds to x; the bounds themselves
    # do when x's significand is even (round half to even).
    low = (_ieee_value(magnitude - 1, layout) + x) / 2
    high = (_ieee_value(magnitude + 1, layout) + x) / 2
    even = magnitude & 1 == 0

    def rounds_to_x(d: Fraction) -> bool:
        return low < d < high or (even and (d == low or d == high))

    k = math.floor(math.log10(float(x)))  # 10^k <= x < 10^(k+1), made exact:
    while Fraction(10) ** k > x:
        k -= 1
    while Fraction(10) ** (k + 1) <= x:
        k += 1

    def candidates(n: int) -> list[tuple[int, int]]:
        """The n-digit decimals either side of x that round to it, as
        (n digits, exponent): a decimal c * 10^exponent."""
        exp = k - n + 1
        scaled = x / Fraction(10) ** exp
        below = scaled.numerator // scaled.denominator
        return [(c, exp) for c in {below, -(-scaled.numerator // scaled.denominator)}
                if rounds_to_x(c * Fraction(10) ** exp)]

    n = 1
    found = candidates(1)
    if found:  # one digit is enough: the closest of the one- and two-digit ones
        found = [(c * 10, exp - 1) for c, exp in found] + candidates(2)
    while not found:
        n += 1
        found = candidates(n)

    def rank(cand: tuple[int, int]) -> tuple[Fraction, int]:
        c, exp = cand  # the closest; of two as close, the one whose last digit is even
        return abs(c * Fraction(10) ** exp - x), c % 2

    digits, exp = min(found, key=rank)
    while digits % 10 == 0:
        digits //= 10
        exp += 1
    text = str(digits)
    point = exp + len(text) - 1  # the decimal exponent of the first digit
    if -3 <= point < 7:
        if point >= 0:
            whole = text[:point + 1].ljust(point + 1, "0")
            return f"{sign}{whole}.{text[point + 1:] or '0'}"
        return f"{sign}0.{'0' * (-point - 1)}{text}"
    return f"{sign}{text[0]}.{text[1:] or '0'}E{point}"


def _java_hex_digit(ch: str) -> int:
    """Character.digit(ch, 16): ASCII and fullwidth a-f/A-F, and any Unicode
    decimal digit (a BMP char: Java reads the string one UTF-16 unit at a time)."""
    code = ord(ch)
    if code < 0x80:
        return int(ch, 16) if ch in string.hexdigits else -1
    if 0xFF21 <= code <= 0xFF26 or 0xFF41 <= code <= 0xFF46:  # fullwidth A-F, a-f
        return (code & 0xF) + 9
    if code > 0xFFFF:
        return -1
    return unicodedata.decimal(ch, -1)


def _java_parse_hex_long(text: str) -> int:
    """Long.parseLong(text, 16) for text without a "-": an optional "+", then
    at least one digit, at most Long.MAX_VALUE (ValueError otherwise)."""
    digits = text[1:] if text.startswith("+") else text
    if not digits:
        raise ValueError(text)
    value = 0
    for ch in digits:
        d = _java_hex_digit(ch)
        if d < 0:
            raise ValueError(text)
        value = value * 16 + d
    if value >= 1 << 63:
        raise ValueError(text)
    return value


def uuid_from_string(text: str) -> uuid.UUID:
    """Java 11+'s UUID.fromString: five "-"-separated hex fields of any
    length, each masked to its width, at most 36 chars (ValueError otherwise)."""
    fields = text.split("-")
    if len(text.encode("utf-16-le")) > 72 or len(fields) != 5:
        raise ValueError(text)
    f = [_java_parse_hex_long(field) for field in fields]
    return uuid.UUID(int=(f[0] & 0xFFFFFFFF) << 96 | (f[1] & 0xFFFF) << 80
                     | (f[2] & 0xFFFF) << 64 | (f[3] & 0xFFFF) << 48 | (f[4] & 0xFFFFFFFFFFFF))
