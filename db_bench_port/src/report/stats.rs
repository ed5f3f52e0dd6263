//! Medians, ratios and verdicts for the winner table.

/// A cell's verdict, as in the original report.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// vmemkv at least 1.1x the fastest rival.
    Win,
    /// Within 10% either way.
    Even,
    /// Below 1/1.1 of the fastest rival.
    Lose,
}

impl Verdict {
    /// The label printed in tables.
    pub fn label(self) -> &'static str {
        match self {
            Verdict::Win => "WIN",
            Verdict::Even => "EVEN",
            Verdict::Lose => "LOSE",
        }
    }
}

/// The margin that separates WIN/LOSE from EVEN.
pub const MARGIN: f64 = 1.1;

/// The verdict for `ratio` = vmemkv / best rival (higher is better).
pub fn verdict(ratio: f64) -> Verdict {
    if ratio >= MARGIN {
        Verdict::Win
    } else if ratio <= 1.0 / MARGIN {
        Verdict::Lose
    } else {
        Verdict::Even
    }
}

/// The median of `xs` (mean of the middle two for an even count); `None` if
/// empty or any value is NaN.
pub fn median(xs: &[f64]) -> Option<f64> {
    if xs.is_empty() || xs.iter().any(|x| x.is_nan()) {
        return None;
    }
    let mut v = xs.to_vec();
    v.sort_by(f64::total_cmp);
    let n = v.len();
    Some(if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    })
}

/// How far a cell's repeats disagree: `(max - min) / median`, with the
/// min and max; `None` for no figures or a median that is not positive.
pub fn spread(xs: &[f64]) -> Option<(f64, f64, f64)> {
    let m = median(xs)?;
    let min = xs.iter().copied().fold(f64::INFINITY, f64::min);
    let max = xs.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    (m > 0.0).then(|| (min, max, (max - min) / m))
}

/// Repeats that disagree by more than this share of their median flag
/// their cell as unsteady.
pub const UNSTEADY: f64 = 0.10;

/// vmemkv's throughput over the best rival's; `None` when the rival has no
/// positive figure.
pub fn ratio(vmemkv: f64, best_rival: f64) -> Option<f64> {
    (best_rival > 0.0 && vmemkv.is_finite()).then(|| vmemkv / best_rival)
}

/// The entry with the highest value.
pub fn best<'a, T>(items: impl IntoIterator<Item = (&'a T, f64)>) -> Option<(&'a T, f64)> {
    items
        .into_iter()
        .filter(|(_, v)| v.is_finite())
        .max_by(|a, b| a.1.total_cmp(&b.1))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn verdict_boundaries() {
        assert_eq!(verdict(1.1), Verdict::Win);
        assert_eq!(verdict(3.0), Verdict::Win);
        assert_eq!(verdict(1.09), Verdict::Even);
        assert_eq!(verdict(1.0), Verdict::Even);
        assert_eq!(verdict(0.92), Verdict::Even);
        assert_eq!(verdict(1.0 / 1.1), Verdict::Lose);
        assert_eq!(verdict(0.5), Verdict::Lose);
    }

    #[test]
    fn median_odd_even_and_bad_input() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), Some(2.0));
        assert_eq!(median(&[4.0, 1.0, 3.0, 2.0]), Some(2.5));
        assert_eq!(median(&[7.0]), Some(7.0));
        assert_eq!(median(&[]), None);
        assert_eq!(median(&[1.0, f64::NAN]), None);
    }

    #[test]
    fn ratio_and_best() {
        assert_eq!(ratio(200.0, 100.0), Some(2.0));
        assert_eq!(ratio(1.0, 0.0), None);
        let names = ["a".to_string(), "b".to_string(), "c".to_string()];
        let got = best(names.iter().zip([1.0, 5.0, 3.0]));
        assert_eq!(got.map(|(n, v)| (n.as_str(), v)), Some(("b", 5.0)));
    }

    #[test]
    fn spread_is_the_range_over_the_median() {
        assert_eq!(spread(&[]), None);
        assert_eq!(spread(&[0.0, 0.0]), None);
        assert_eq!(spread(&[100.0]), Some((100.0, 100.0, 0.0)));
        let (min, max, s) = spread(&[90.0, 100.0, 120.0]).unwrap_or_default();
        assert_eq!((min, max), (90.0, 120.0));
        assert!((s - 0.30).abs() < 1e-9, "{s}");
        // 10% exactly is steady; just past it is not.
        assert!(spread(&[95.0, 100.0, 105.0]).is_some_and(|(_, _, s)| s <= UNSTEADY));
        assert!(spread(&[94.0, 100.0, 105.0]).is_some_and(|(_, _, s)| s > UNSTEADY));
    }
}
