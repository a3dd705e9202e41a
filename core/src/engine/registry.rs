//! Every service's engine, in name order, reachable by name or by a [`ServiceHandle`]: the
//! service's index, resolved once (when a probe loop is attached) so that each observation
//! skips the search by name among thousands of services. PURE.
//!
//! A handle is checked at every use: it names its service's slot and the registry's epoch,
//! which moves on whenever a service is added or removed (a reload); a handle of another
//! epoch, or whose slot holds another service, is not used: the service is found by name
//! instead. An observation is never attributed to another service than the one it names.

use crate::model::ServiceId;

use super::service::ServiceEngine;

/// A service resolved to its place in the engine ([`super::Engine::handle`]). Valid until the
/// next reload that adds or removes a service; a stale one costs a search by name, never a
/// wrong service.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ServiceHandle {
    slot: u32,
    epoch: u64,
}

impl ServiceHandle {
    /// The service's place among [`super::Engine::services`], in their order (by name); valid
    /// as long as the handle.
    pub fn slot(self) -> usize {
        self.slot as usize
    }
}

/// Every service's engine, sorted by name.
#[derive(Debug, Clone, Default)]
pub(super) struct Services {
    list: Vec<(ServiceId, ServiceEngine)>,
    /// Moves on whenever a service is added or removed (slots move).
    epoch: u64,
}

impl Services {
    fn position(&self, id: &ServiceId) -> Result<usize, usize> {
        self.list.binary_search_by(|(k, _)| k.cmp(id))
    }

    /// The engine of `id`.
    pub(super) fn get(&self, id: &ServiceId) -> Option<&ServiceEngine> {
        self.position(id).ok().map(|i| &self.list[i].1)
    }

    /// The engine of `id`, to change.
    pub(super) fn get_mut(&mut self, id: &ServiceId) -> Option<&mut ServiceEngine> {
        self.position(id).ok().map(|i| &mut self.list[i].1)
    }

    /// The handle of `id`, valid until a service is added or removed.
    pub(super) fn handle(&self, id: &ServiceId) -> Option<ServiceHandle> {
        let slot = u32::try_from(self.position(id).ok()?).ok()?;
        Some(ServiceHandle {
            slot,
            epoch: self.epoch,
        })
    }

    /// The place of `id` through `handle` when it still names `id`'s slot, else by name.
    fn slot(&self, id: &ServiceId, handle: Option<ServiceHandle>) -> Option<usize> {
        handle
            .filter(|h| h.epoch == self.epoch)
            .map(|h| h.slot as usize)
            .filter(|&i| self.list.get(i).is_some_and(|(k, _)| k == id))
            .or_else(|| self.position(id).ok())
    }

    /// The engine of `id` through `handle` when it still names `id`'s slot, else by name.
    pub(super) fn resolve(
        &self,
        id: &ServiceId,
        handle: Option<ServiceHandle>,
    ) -> Option<&ServiceEngine> {
        self.slot(id, handle).map(|i| &self.list[i].1)
    }

    /// [`Services::resolve`], to change.
    pub(super) fn resolve_mut(
        &mut self,
        id: &ServiceId,
        handle: Option<ServiceHandle>,
    ) -> Option<&mut ServiceEngine> {
        self.slot(id, handle).map(|i| &mut self.list[i].1)
    }

    /// Adds `engine` as `id`'s, or replaces the one it has.
    pub(super) fn insert(&mut self, id: ServiceId, engine: ServiceEngine) {
        match self.position(&id) {
            Ok(i) => self.list[i].1 = engine,
            Err(i) => {
                self.list.insert(i, (id, engine));
                self.epoch += 1;
            }
        }
    }

    /// Drops `id`'s engine, if any.
    pub(super) fn remove(&mut self, id: &ServiceId) {
        if let Ok(i) = self.position(id) {
            self.list.remove(i);
            self.epoch += 1;
        }
    }

    /// Every service's name, in order.
    pub(super) fn keys(&self) -> impl Iterator<Item = &ServiceId> {
        self.list.iter().map(|(k, _)| k)
    }

    /// Every service's engine, by name.
    pub(super) fn values(&self) -> impl Iterator<Item = &ServiceEngine> {
        self.list.iter().map(|(_, s)| s)
    }

    /// Every service's engine, by name, to change.
    pub(super) fn values_mut(&mut self) -> impl Iterator<Item = &mut ServiceEngine> {
        self.list.iter_mut().map(|(_, s)| s)
    }

    /// Every service's name and engine, to change.
    pub(super) fn iter_mut(&mut self) -> impl Iterator<Item = (&ServiceId, &mut ServiceEngine)> {
        self.list.iter_mut().map(|(k, s)| (&*k, s))
    }
}

impl FromIterator<(ServiceId, ServiceEngine)> for Services {
    /// Services with unique names (a later one of the same name replaces an earlier one).
    fn from_iter<I: IntoIterator<Item = (ServiceId, ServiceEngine)>>(iter: I) -> Self {
        let mut list: Vec<_> = iter.into_iter().collect();
        list.sort_by(|a, b| a.0.cmp(&b.0));
        list.reverse();
        list.dedup_by(|a, b| a.0 == b.0);
        list.reverse();
        Self { list, epoch: 0 }
    }
}
