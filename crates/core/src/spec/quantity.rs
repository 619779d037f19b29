//! Kubernetes resource quantities (`100m`, `1.5Gi`, `1e3`): parsing, comparison and the canonical form.
//!
//! The grammar and the canonical form follow `k8s.io/apimachinery/pkg/api/resource`: a signed
//! decimal number and a suffix that is a binary SI (`Ki`..`Ei`), decimal SI (`n`, `u`, `m`, none,
//! `k`..`E`) or decimal exponent (`e3`, `E-2`). Values are held exactly, in nano-units, which
//! is the finest precision Kubernetes keeps (finer values round up to `1n`, as it does).

use std::cmp::Ordering;
use std::fmt;
use std::str::FromStr;

use serde::{Serialize, Serializer};

/// Nano-units per unit.
const NANOS: i128 = 1_000_000_000;
/// The largest magnitude Kubernetes keeps, in units (it caps larger values; kubeferry refuses them).
const MAX_UNITS: i128 = i64::MAX as i128;

/// How a quantity was written, which decides how its canonical form is written.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum QuantityFormat {
    /// Powers of two: `Ki`, `Mi`, `Gi`, `Ti`, `Pi`, `Ei`.
    BinarySi,
    /// Powers of ten with SI suffixes: `n`, `u`, `m`, none, `k`, `M`, `G`, `T`, `P`, `E`.
    DecimalSi,
    /// Powers of ten written as an exponent: `1e3`, `5E-3`.
    DecimalExponent,
}

/// A Kubernetes quantity, exact to the nano-unit.
///
/// Equality and ordering compare values (`1000m == 1`); [`fmt::Display`] writes the canonical
/// form Kubernetes itself stores, so what kubeferry sends is what the API server keeps.
#[derive(Clone, Copy, Debug)]
pub struct Quantity {
    nanos: i128,
    format: QuantityFormat,
}

/// Why a string is not a Kubernetes quantity.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum QuantityError {
    /// The text does not follow the quantity grammar.
    #[error(
        "{0:?} is not a Kubernetes quantity (a number with an optional suffix: n u m k M G T P E, Ki Mi Gi Ti Pi Ei, or an exponent such as 1e3)"
    )]
    Syntax(String),
    /// The value is larger than Kubernetes can represent.
    #[error("{0:?} is too large for a Kubernetes quantity (at most 2^63-1)")]
    TooLarge(String),
}

impl Quantity {
    /// The quantity `units` (a whole number) in the decimal SI format.
    pub fn from_units(units: i64) -> Self {
        Self {
            nanos: i128::from(units) * NANOS,
            format: QuantityFormat::DecimalSi,
        }
    }

    /// The value in nano-units.
    pub fn nanos(&self) -> i128 {
        self.nanos
    }

    /// How the quantity was written.
    pub fn format(&self) -> QuantityFormat {
        self.format
    }

    /// Whether the value is a whole number of units.
    pub fn is_whole(&self) -> bool {
        self.nanos % NANOS == 0
    }

    /// Whether the value is below zero.
    pub fn is_negative(&self) -> bool {
        self.nanos < 0
    }

    /// Whether the value is a whole number of thousandths (Kubernetes' finest CPU precision).
    pub fn is_whole_milli(&self) -> bool {
        self.nanos % (NANOS / 1000) == 0
    }

    /// The sum of two quantities, in the format of `self`; `None` past the largest quantity.
    pub fn checked_add(&self, other: &Quantity) -> Option<Quantity> {
        let nanos = self.nanos.checked_add(other.nanos)?;
        (nanos.abs() <= MAX_UNITS * NANOS).then_some(Quantity {
            nanos,
            format: self.format,
        })
    }

    /// The quantity in k8s-openapi's representation (its canonical string).
    pub fn to_k8s(&self) -> k8s_openapi::apimachinery::pkg::api::resource::Quantity {
        k8s_openapi::apimachinery::pkg::api::resource::Quantity(self.to_string())
    }
}

impl PartialEq for Quantity {
    fn eq(&self, other: &Self) -> bool {
        self.nanos == other.nanos
    }
}

impl Eq for Quantity {}

impl PartialOrd for Quantity {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Quantity {
    fn cmp(&self, other: &Self) -> Ordering {
        self.nanos.cmp(&other.nanos)
    }
}

impl Serialize for Quantity {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

/// The multiplier of a suffix: `10^exp` or `2^exp`, and the format it implies.
enum Scale {
    Decimal(i32),
    Binary(u32),
}

fn suffix_scale(suffix: &str) -> Option<(Scale, QuantityFormat)> {
    let decimal = |e| Some((Scale::Decimal(e), QuantityFormat::DecimalSi));
    let binary = |e| Some((Scale::Binary(e), QuantityFormat::BinarySi));
    match suffix {
        "n" => decimal(-9),
        "u" => decimal(-6),
        "m" => decimal(-3),
        "" => decimal(0),
        "k" => decimal(3),
        "M" => decimal(6),
        "G" => decimal(9),
        "T" => decimal(12),
        "P" => decimal(15),
        "E" => decimal(18),
        "Ki" => binary(10),
        "Mi" => binary(20),
        "Gi" => binary(30),
        "Ti" => binary(40),
        "Pi" => binary(50),
        "Ei" => binary(60),
        _ => {
            // An exponent: `e` or `E` and a signed integer (a bare `E` is exa, matched above).
            let rest = suffix.strip_prefix(['e', 'E'])?;
            let digits = rest.strip_prefix(['+', '-']).unwrap_or(rest);
            if digits.is_empty() || digits.len() > 3 || !digits.bytes().all(|b| b.is_ascii_digit())
            {
                return None;
            }
            let exp: i32 = rest.parse().ok()?;
            Some((Scale::Decimal(exp), QuantityFormat::DecimalExponent))
        }
    }
}

impl FromStr for Quantity {
    type Err = QuantityError;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let syntax = || QuantityError::Syntax(text.to_string());
        let too_large = || QuantityError::TooLarge(text.to_string());

        let (negative, unsigned) = match text.as_bytes().first() {
            Some(b'-') => (true, &text[1..]),
            Some(b'+') => (false, &text[1..]),
            _ => (false, text),
        };
        let number_len = unsigned
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(unsigned.len());
        let (number, suffix) = unsigned.split_at(number_len);
        let (whole, fraction) = number.split_once('.').unwrap_or((number, ""));
        if whole.is_empty() && fraction.is_empty() || fraction.contains('.') {
            return Err(syntax());
        }
        let (scale, format) = suffix_scale(suffix).ok_or_else(syntax)?;

        // The digits as an integer `mantissa * 10^-fraction_len`, leading zeros dropped so
        // that long zero-padded numbers still fit.
        let digits = format!("{whole}{fraction}");
        let significant = digits.trim_start_matches('0');
        if significant.len() > 36 {
            return Err(too_large());
        }
        let mantissa: i128 = if significant.is_empty() {
            0
        } else {
            significant.parse().map_err(|_| syntax())?
        };
        let fraction_len = i32::try_from(fraction.len()).map_err(|_| syntax())?;

        // nanos = mantissa * multiplier * 10^9 / 10^fraction_len, rounded away from zero.
        let (mut numerator, mut denominator_exp): (i128, i32) = (mantissa, fraction_len - 9);
        match scale {
            Scale::Binary(bits) => {
                numerator = numerator.checked_shl(bits).ok_or_else(too_large)?;
                if numerator >> bits != mantissa {
                    return Err(too_large());
                }
            }
            Scale::Decimal(exp) => denominator_exp -= exp,
        }
        let nanos = if mantissa == 0 {
            0
        } else if denominator_exp <= 0 {
            let factor = 10i128
                .checked_pow(denominator_exp.unsigned_abs())
                .ok_or_else(too_large)?;
            numerator.checked_mul(factor).ok_or_else(too_large)?
        } else if denominator_exp > 38 {
            1 // Far below a nano-unit: rounds up to one.
        } else {
            let divisor = 10i128.pow(denominator_exp.unsigned_abs());
            numerator / divisor + i128::from(numerator % divisor != 0)
        };
        if nanos > MAX_UNITS * NANOS {
            return Err(too_large());
        }
        Ok(Quantity {
            nanos: if negative { -nanos } else { nanos },
            format,
        })
    }
}

impl fmt::Display for Quantity {
    /// The canonical form, as Kubernetes writes it: `1000m` is `1`, `1.5Gi` is `1536Mi`, `0.5`
    /// is `500m`; binary values below 1Ki or not whole switch to decimal SI.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.nanos == 0 {
            return f.write_str("0");
        }
        let sign = if self.nanos < 0 { "-" } else { "" };
        let magnitude = self.nanos.unsigned_abs();
        let binary = self.format == QuantityFormat::BinarySi
            && magnitude >= 1024 * NANOS as u128
            && magnitude.is_multiple_of(NANOS as u128);
        if binary {
            let mut units = magnitude / NANOS as u128;
            let mut power = 0;
            while units.is_multiple_of(1024) && power < 6 {
                units /= 1024;
                power += 1;
            }
            let suffix = ["", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei"][power];
            return write!(f, "{sign}{units}{suffix}");
        }
        // Decimal: strip trailing zeros, then bring the exponent down to a multiple of three.
        let mut mantissa = magnitude;
        let mut exponent: i32 = -9;
        while mantissa.is_multiple_of(10) {
            mantissa /= 10;
            exponent += 1;
        }
        let extra = exponent.rem_euclid(3);
        mantissa *= 10u128.pow(extra.unsigned_abs());
        exponent -= extra;
        if self.format == QuantityFormat::DecimalExponent {
            return if exponent == 0 {
                write!(f, "{sign}{mantissa}")
            } else {
                write!(f, "{sign}{mantissa}e{exponent}")
            };
        }
        let suffix = match exponent {
            -9 => "n",
            -6 => "u",
            -3 => "m",
            0 => "",
            3 => "k",
            6 => "M",
            9 => "G",
            12 => "T",
            15 => "P",
            _ => "E", // 18: the largest, since values are capped at 2^63-1.
        };
        write!(f, "{sign}{mantissa}{suffix}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn q(s: &str) -> Quantity {
        s.parse().unwrap_or_else(|e| panic!("{s}: {e}"))
    }

    #[test]
    fn canonical_forms_match_kubernetes() {
        // (input, canonical) pairs as k8s.io/apimachinery writes them.
        let cases = [
            ("0", "0"),
            ("0m", "0"),
            ("0Gi", "0"),
            ("1", "1"),
            ("+1", "1"),
            ("1000m", "1"),
            ("100m", "100m"),
            ("0.1", "100m"),
            (".5", "500m"),
            ("5.", "5"),
            ("1.5", "1500m"),
            ("1500m", "1500m"),
            ("0.0001", "100u"),
            ("1n", "1n"),
            ("1u", "1u"),
            ("0.1n", "1n"),
            ("1k", "1k"),
            ("1000", "1k"),
            ("1200", "1200"),
            ("12M", "12M"),
            ("2G", "2G"),
            ("1T", "1T"),
            ("1P", "1P"),
            ("1E", "1E"),
            ("64Mi", "64Mi"),
            ("1Gi", "1Gi"),
            ("1024Mi", "1Gi"),
            ("1536Mi", "1536Mi"),
            ("1.5Gi", "1536Mi"),
            ("2048Ki", "2Mi"),
            ("0.5Ki", "512"),
            ("1Ki", "1Ki"),
            ("1023", "1023"),
            ("1.1Ki", "1126400m"),
            ("1Ei", "1Ei"),
            ("1e3", "1e3"),
            ("1E3", "1e3"),
            ("1e0", "1"),
            ("1e-3", "1e-3"),
            ("1000e-3", "1"),
            ("12e6", "12e6"),
            ("-1", "-1"),
            ("-100m", "-100m"),
            ("-1Ki", "-1Ki"),
            ("007", "7"),
        ];
        for (input, canonical) in cases {
            assert_eq!(q(input).to_string(), canonical, "{input}");
            // The canonical form is a fixed point.
            assert_eq!(q(canonical).to_string(), canonical, "{canonical}");
            assert_eq!(q(canonical), q(input));
        }
    }

    #[test]
    fn values_compare_across_suffixes() {
        assert_eq!(q("1000m"), q("1"));
        assert_eq!(q("1Ki"), q("1024"));
        assert_eq!(q("1e3"), q("1k"));
        assert!(q("1Gi") > q("1G"));
        assert!(q("999m") < q("1"));
        assert!(q("128Mi") < q("0.5Gi"));
        assert!(q("-1") < q("0"));
        assert_eq!(q("64Mi").nanos(), 64 * 1024 * 1024 * NANOS);
    }

    #[test]
    fn malformed_quantities_are_rejected() {
        for bad in [
            "", "-", "+", ".", "..", "1..2", "1.2.3", "12XB", "1 Gi", " 1", "1Gi ", "Gi", "m",
            "1mi", "1KI", "1kb", "1e", "1e+", "1e1.5", "1ee3", "1e1000", "0x10", "1_000", "--1",
            "1,5", "1g", "1Ki2",
        ] {
            assert!(
                matches!(bad.parse::<Quantity>(), Err(QuantityError::Syntax(_))),
                "{bad:?} should be a syntax error"
            );
        }
    }

    #[test]
    fn limits_of_size() {
        assert_eq!(q("9223372036854775807").to_string(), "9223372036854775807");
        assert_eq!(q("7Ei").to_string(), "7Ei");
        for big in ["9223372036854775808", "8Ei", "10E", "1e19", &"9".repeat(60)] {
            assert!(
                matches!(big.parse::<Quantity>(), Err(QuantityError::TooLarge(_))),
                "{big} should be too large"
            );
        }
        // Tiny values round up to one nano-unit, as Kubernetes does.
        assert_eq!(q("1e-30").to_string(), "1e-9");
        assert_eq!(q("0.0000000001").to_string(), "1n");
        assert_eq!(q(&format!("0.{}", "0".repeat(80))).to_string(), "0");
    }

    #[test]
    fn helpers() {
        assert!(q("2").is_whole() && !q("1500m").is_whole());
        assert!(q("1m").is_whole_milli() && !q("100u").is_whole_milli());
        assert!(q("-1").is_negative());
        assert_eq!(q("1Gi").checked_add(&q("1Gi")), Some(q("2Gi")));
        assert_eq!(Quantity::from_units(3), q("3"));
        assert_eq!(q("1.5Gi").to_k8s().0, "1536Mi");
        assert_eq!(
            serde_json::to_string(&q("1000m")).ok(),
            Some("\"1\"".into())
        );
    }
}
