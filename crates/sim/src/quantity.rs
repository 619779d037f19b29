//! Kubernetes resource quantities (`500m`, `2`, `1.5Gi`, `1e3`) as integer milli-units.

/// Parses a quantity into thousandths of its unit (millicores for CPU, millibytes for memory),
/// rounding up as Kubernetes does. `None` when the text is not a quantity.
pub fn parse(text: &str) -> Option<i128> {
    let text = text.trim();
    if text.is_empty() {
        return None;
    }
    let (sign, rest) = match text.as_bytes()[0] {
        b'-' => (-1, &text[1..]),
        b'+' => (1, &text[1..]),
        _ => (1, text),
    };
    let number_end = rest
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(rest.len());
    let (number, suffix) = rest.split_at(number_end);
    if number.is_empty() || number == "." || number.matches('.').count() > 1 {
        return None;
    }
    let (int_part, frac_part) = number.split_once('.').unwrap_or((number, ""));
    // Value as a fraction: digits / 10^frac_len.
    let digits: String = format!("{int_part}{frac_part}");
    let mantissa: i128 = if digits.is_empty() {
        0
    } else {
        digits.parse().ok()?
    };
    let frac_len = frac_part.len() as i32;
    // Multiplier as (numerator, base-10 exponent): value = mantissa * num * 10^exp10 / 10^frac_len.
    let (num, exp10): (i128, i32) = match suffix {
        "" => (1, 0),
        "Ki" => (1 << 10, 0),
        "Mi" => (1 << 20, 0),
        "Gi" => (1 << 30, 0),
        "Ti" => (1 << 40, 0),
        "Pi" => (1 << 50, 0),
        "Ei" => (1 << 60, 0),
        "n" => (1, -9),
        "u" => (1, -6),
        "m" => (1, -3),
        "k" => (1, 3),
        "M" => (1, 6),
        "G" => (1, 9),
        "T" => (1, 12),
        "P" => (1, 15),
        "E" => (1, 18),
        other => {
            let exp = other.strip_prefix(['e', 'E'])?;
            (1, exp.parse().ok()?)
        }
    };
    // Milli-units: multiply by 1000 = 10^3.
    let total_exp = exp10 + 3 - frac_len;
    let base = mantissa.checked_mul(num)?;
    let value = if total_exp >= 0 {
        base.checked_mul(10i128.checked_pow(total_exp as u32)?)?
    } else {
        let div = 10i128.checked_pow((-total_exp) as u32)?;
        // Round up, as Kubernetes does for sub-milli precision.
        (base + div - 1) / div
    };
    Some(sign * value)
}

/// Formats milli-units the way Kubernetes prints a CPU quantity (`500m`, `2`).
pub fn format_cpu(milli: i128) -> String {
    if milli % 1000 == 0 {
        (milli / 1000).to_string()
    } else {
        format!("{milli}m")
    }
}

/// Formats milli-units of bytes as a binary quantity when it divides evenly (`16Gi`).
pub fn format_bytes(milli: i128) -> String {
    let bytes = milli / 1000;
    for (suffix, shift) in [
        ("Ei", 60),
        ("Pi", 50),
        ("Ti", 40),
        ("Gi", 30),
        ("Mi", 20),
        ("Ki", 10),
    ] {
        let unit = 1i128 << shift;
        if bytes >= unit && bytes % unit == 0 {
            return format!("{}{suffix}", bytes / unit);
        }
    }
    bytes.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_usual_forms() {
        let table: &[(&str, Option<i128>)] = &[
            ("1", Some(1000)),
            ("500m", Some(500)),
            ("0.5", Some(500)),
            ("2.5", Some(2500)),
            ("1Ki", Some(1024 * 1000)),
            ("16Gi", Some((16i128 << 30) * 1000)),
            ("1k", Some(1_000_000)),
            ("1e3", Some(1_000_000)),
            ("100n", Some(1)),
            ("-1", Some(-1000)),
            ("12XB", None),
            ("", None),
            ("abc", None),
            ("1.2.3", None),
        ];
        for (text, want) in table {
            assert_eq!(parse(text), *want, "{text}");
        }
    }

    #[test]
    fn formats_round_trip() {
        assert_eq!(format_cpu(parse("4").unwrap_or_default()), "4");
        assert_eq!(format_cpu(parse("250m").unwrap_or_default()), "250m");
        assert_eq!(format_bytes(parse("16Gi").unwrap_or_default()), "16Gi");
        assert_eq!(format_bytes(parse("1000").unwrap_or_default()), "1000");
    }
}
