//! [`EndpointTable`]: one value per (service, endpoint, vantage point), found by borrowed
//! names, for what is kept per probe result on the engine loop's path (the metrics' resolved
//! series). Looking an entry up allocates nothing; only
//! the first result of an endpoint copies its names.

use std::collections::HashMap;

use gslb_core::model::{EndpointId, ServiceId, VantageId};

/// Values by service, then endpoint, then vantage point (a short list: one entry per vantage
/// point whose results reach this instance, usually one).
#[derive(Debug)]
pub struct EndpointTable<T> {
    services: HashMap<String, HashMap<String, Vec<(VantageId, T)>>>,
}

impl<T> Default for EndpointTable<T> {
    fn default() -> Self {
        Self {
            services: HashMap::new(),
        }
    }
}

impl<T> EndpointTable<T> {
    /// The value of `endpoint` of `service` seen from `vantage`, made by `make` the first time.
    pub fn get_or_insert_with(
        &mut self,
        service: &ServiceId,
        endpoint: &EndpointId,
        vantage: &VantageId,
        make: impl FnOnce() -> T,
    ) -> &mut T {
        let by_vantage = slot(slot(&mut self.services, &service.0), &endpoint.0);
        let at = match by_vantage.iter().position(|(v, _)| v == vantage) {
            Some(i) => i,
            None => {
                // Usually the only entry: room for it alone, not four.
                by_vantage.reserve_exact(1);
                by_vantage.push((vantage.clone(), make()));
                by_vantage.len() - 1
            }
        };
        &mut by_vantage[at].1
    }

    /// Forgets every value of `service`.
    pub fn remove_service(&mut self, service: &ServiceId) {
        self.services.remove(service.0.as_str());
    }

    /// How many (service, endpoint, vantage point) entries are kept.
    pub fn len(&self) -> usize {
        self.services
            .values()
            .flat_map(HashMap::values)
            .map(Vec::len)
            .sum()
    }

    /// Whether no entry is kept.
    pub fn is_empty(&self) -> bool {
        self.services.is_empty()
    }
}

/// `map[key]`, inserted empty when missing; copies `key` only then.
fn slot<'a, V: Default>(map: &'a mut HashMap<String, V>, key: &str) -> &'a mut V {
    if !map.contains_key(key) {
        map.insert(key.to_owned(), V::default());
    }
    map.get_mut(key)
        .expect("present: inserted above when missing")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_are_per_service_endpoint_and_vantage_point() {
        let mut t = EndpointTable::default();
        let (api, web) = (ServiceId::from("api"), ServiceId::from("web"));
        let e = EndpointId::from("http://a/health");
        let (v1, v2) = (VantageId::from("seoul"), VantageId::from("tokyo"));
        *t.get_or_insert_with(&api, &e, &v1, || 0) += 1;
        *t.get_or_insert_with(&api, &e, &v1, || 100) += 1;
        *t.get_or_insert_with(&api, &e, &v2, || 10) += 1;
        *t.get_or_insert_with(&web, &e, &v1, || 20) += 1;
        assert_eq!(t.len(), 3);
        let mut value = |s, v| *t.get_or_insert_with(s, &e, v, || -1);
        assert_eq!(value(&api, &v1), 2, "made once, then found");
        assert_eq!(value(&api, &v2), 11);
        assert_eq!(value(&web, &v1), 21);
        t.remove_service(&api);
        assert_eq!(t.len(), 1);
        assert!(!t.is_empty());
        assert_eq!(*t.get_or_insert_with(&api, &e, &v1, || -1), -1, "forgotten");
    }
}
