//! One stable sort for the whole core. Every `sort_by` of the standard library is compiled
//! anew for each element type and comparison (its quicksort, driftsort and small sorts: 129
//! copies, 66 KB of the wasm for 25 sorts of at most a few thousand items). Here one merge sort
//! of positions is compiled once, behind a `dyn` comparison, and only the short wrappers and the
//! final move of the items are made per type.

use std::cmp::Ordering;

/// Sorts `v` by `cmp`, keeping equal items in their order (a stable sort, as `slice::sort_by`).
pub fn by<T>(v: &mut Vec<T>, mut cmp: impl FnMut(&T, &T) -> Ordering) {
    if v.len() < 2 {
        return;
    }
    let order = positions(v.len(), &mut |i, j| cmp(&v[i], &v[j]));
    let mut slots: Vec<Option<T>> = v.drain(..).map(Some).collect();
    v.extend(order.into_iter().filter_map(|i| slots[i].take()));
}

/// Sorts `v` by the key `key` gives, keeping equal items in their order.
pub fn by_key<T, K: Ord>(v: &mut Vec<T>, mut key: impl FnMut(&T) -> K) {
    by(v, |a, b| key(a).cmp(&key(b)));
}

/// Sorts `v` in ascending order.
pub fn ascending<T: Ord>(v: &mut Vec<T>) {
    by(v, T::cmp);
}

/// The positions `0..n` in the order `cmp` gives them (a bottom-up merge sort: stable, n log n
/// comparisons, no recursion).
fn positions(n: usize, cmp: &mut dyn FnMut(usize, usize) -> Ordering) -> Vec<usize> {
    let mut from: Vec<usize> = (0..n).collect();
    let mut into = vec![0; n];
    let mut width = 1;
    while width < n {
        for start in (0..n).step_by(2 * width) {
            let (mid, end) = ((start + width).min(n), (start + 2 * width).min(n));
            let (mut a, mut b) = (start, mid);
            for slot in &mut into[start..end] {
                // The left run's item first unless the right one is strictly smaller: stable.
                let left = a < mid && (b >= end || cmp(from[a], from[b]) != Ordering::Greater);
                *slot = if left { from[a] } else { from[b] };
                if left {
                    a += 1;
                } else {
                    b += 1;
                }
            }
        }
        std::mem::swap(&mut from, &mut into);
        width *= 2;
    }
    from
}

#[cfg(test)]
mod tests {
    use super::{ascending, by, by_key};

    #[test]
    fn sorts_as_the_standard_stable_sort_does() {
        let mut seed = 0x9e37_79b9_u64;
        for n in [0, 1, 2, 3, 7, 8, 9, 31, 64, 100, 1000] {
            let v: Vec<(u8, usize)> = (0..n)
                .map(|i| {
                    seed ^= seed << 13;
                    seed ^= seed >> 7;
                    seed ^= seed << 17;
                    ((seed % 7) as u8, i)
                })
                .collect();
            let (mut ours, mut std) = (v.clone(), v.clone());
            by(&mut ours, |a, b| b.0.cmp(&a.0));
            std.sort_by_key(|x| std::cmp::Reverse(x.0));
            assert_eq!(ours, std, "{n} items, equal keys kept in their order");
            let (mut ours, mut std) = (v.clone(), v);
            by_key(&mut ours, |x| x.0);
            std.sort_by_key(|x| x.0);
            assert_eq!(ours, std);
            ascending(&mut ours);
            std.sort();
            assert_eq!(ours, std);
        }
    }
}
