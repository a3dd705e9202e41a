//! One endpoint's rise/fall state per vantage point: a vector sorted by vantage point.
//!
//! An endpoint has one entry per vantage point that probed it: one alone, three in a typical
//! cluster. A `BTreeMap` allocates a node of eleven entries for the first one (about 2.2 kB
//! for an [`EndpointHealth`]), a growing `Vec` room for four; this holds exactly the entries
//! there are (about 200 bytes each), which at 10,000 endpoints is the difference between 22 MB
//! and 2 MB.

use crate::model::VantageId;

use super::health::EndpointHealth;

/// An endpoint's [`EndpointHealth`] by vantage point, iterated in vantage point order (as a
/// `BTreeMap` would be).
#[derive(Debug, Clone, Default)]
pub struct ByVantage(Vec<(VantageId, EndpointHealth)>);

impl ByVantage {
    /// The state as seen from `vantage`, if it reported.
    pub fn get(&self, vantage: &VantageId) -> Option<&EndpointHealth> {
        self.find(vantage).ok().map(|i| &self.0[i].1)
    }

    /// The state as seen from `vantage`, to change, if it reported.
    pub fn get_mut(&mut self, vantage: &VantageId) -> Option<&mut EndpointHealth> {
        self.find(vantage).ok().map(|i| &mut self.0[i].1)
    }

    /// The state as seen from `vantage`, a new one (`unknown`) when it had not reported.
    pub fn or_default(&mut self, vantage: &VantageId) -> &mut EndpointHealth {
        let i = self.find(vantage).unwrap_or_else(|i| {
            // Room for exactly one more: a growing `Vec` would make room for four.
            self.0.reserve_exact(1);
            self.0
                .insert(i, (vantage.clone(), EndpointHealth::default()));
            i
        });
        &mut self.0[i].1
    }

    /// Whether no vantage point reported.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Every vantage point that reported, in order.
    pub fn keys(&self) -> impl Iterator<Item = &VantageId> {
        self.0.iter().map(|(v, _)| v)
    }

    /// Every state, in vantage point order.
    pub fn values(&self) -> impl Iterator<Item = &EndpointHealth> {
        self.0.iter().map(|(_, h)| h)
    }

    /// Every state, to change, in vantage point order.
    pub fn values_mut(&mut self) -> impl Iterator<Item = &mut EndpointHealth> {
        self.0.iter_mut().map(|(_, h)| h)
    }

    /// Every vantage point with its state, in order.
    pub fn iter(&self) -> impl Iterator<Item = (&VantageId, &EndpointHealth)> {
        self.0.iter().map(|(v, h)| (v, h))
    }

    fn find(&self, vantage: &VantageId) -> Result<usize, usize> {
        self.0.binary_search_by(|(v, _)| v.cmp(vantage))
    }
}

impl<'a> IntoIterator for &'a ByVantage {
    type Item = (&'a VantageId, &'a EndpointHealth);
    type IntoIter = std::iter::Map<
        std::slice::Iter<'a, (VantageId, EndpointHealth)>,
        fn(&'a (VantageId, EndpointHealth)) -> (&'a VantageId, &'a EndpointHealth),
    >;

    fn into_iter(self) -> Self::IntoIter {
        self.0.iter().map(|(v, h)| (v, h))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(name: &str) -> VantageId {
        VantageId(name.into())
    }

    #[test]
    fn entries_stay_in_vantage_point_order_and_are_found_by_name() {
        let mut m = ByVantage::default();
        for name in ["seoul", "gcp", "tokyo", "gcp"] {
            m.or_default(&v(name)).consecutive_ok += 1;
        }
        let keys: Vec<_> = m.keys().map(|k| k.0.as_str()).collect();
        assert_eq!(keys, ["gcp", "seoul", "tokyo"]);
        assert_eq!(m.get(&v("gcp")).map(|h| h.consecutive_ok), Some(2));
        assert!(m.get(&v("aws")).is_none());
        m.get_mut(&v("tokyo")).expect("tokyo").consecutive_fail = 3;
        let fails: Vec<u32> = m.values().map(|h| h.consecutive_fail).collect();
        assert_eq!(fails, [0, 0, 3]);
        assert_eq!((&m).into_iter().count(), 3);
    }
}
