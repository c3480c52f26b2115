//! Who presented which key: the person or one of their grants, and the
//! grants' keys a door compares a presented key against.

use std::sync::Arc;

use state_dir::Token;

use crate::grant::{Door, Grant};

/// reach every shared tab) or one of their grants.
#[derive(Debug, Clone, Default)]
pub enum Access {
    #[default]
    Person,
    Grant(Arc<Grant>),
}

impl Access {
    pub fn grant(&self) -> Option<&Arc<Grant>> {
        match self {
            Self::Person => None,
            Self::Grant(grant) => Some(grant),
        }
    }

    /// The grant's name, if a grant's.
    pub fn grant_name(&self) -> Option<&str> {
        self.grant().map(|g| g.name.as_str())
    }

    /// Whether a tab in `group` (`None`: the person's own sharing) is this
    /// access's to see: the person sees every shared tab, a grant only its own.
    pub fn sees(&self, group: Option<&str>) -> bool {
        match self {
            Self::Person => true,
            Self::Grant(grant) => group == Some(grant.name.as_str()),
        }
    }
}

/// The grants' keys, derived once per load: what a door compares a
/// presented key against.
#[derive(Debug, Clone, Default)]
pub struct GrantKeys {
    keys: Vec<(Arc<Grant>, Token, Token)>,
}

impl GrantKeys {
    pub fn new(secret: &Token, grants: &[Grant]) -> Self {
        let keys = grants
            .iter()
            .map(|g| (Arc::new(g.clone()), g.key(secret, Door::Cdp), g.key(secret, Door::Control)))
            .collect();
        Self { keys }
    }

    /// The grant whose `door` key is `presented` (compared in constant
    /// time with every grant's). An expired grant's key opens nothing.
    pub fn find(&self, presented: &str, door: Door) -> Option<Arc<Grant>> {
        let mut found = None;
        for (grant, cdp, control) in &self.keys {
            let key = if door == Door::Cdp { cdp } else { control };
            if key.matches(presented) {
                found = Some(grant.clone());
            }
        }
        found.filter(|g| !g.expired())
    }

    pub fn grants(&self) -> impl Iterator<Item = &Arc<Grant>> {
        self.keys.iter().map(|(g, _, _)| g)
    }

    /// The grant of that name.
    pub fn named(&self, name: &str) -> Option<&Arc<Grant>> {
        self.grants().find(|g| g.name.as_str() == name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::grant::now_ms;
    use crate::grant::tests::grant;

    #[test]
    fn a_key_opens_its_own_door_for_its_own_grant_until_it_expires() {
        let secret = Token::generate();
        let (a, b, gone) = (grant("a", None), grant("b", Some(now_ms() + 60_000)), grant("gone", Some(1)));
        let keys = GrantKeys::new(&secret, &[a.clone(), b.clone(), gone.clone()]);
        let found = |key: &Token, door| keys.find(key.as_str(), door).map(|g| g.name.to_string());
        assert_eq!(found(&a.key(&secret, Door::Cdp), Door::Cdp).as_deref(), Some("a"));
        assert_eq!(found(&b.key(&secret, Door::Control), Door::Control).as_deref(), Some("b"));
        assert_eq!(found(&a.key(&secret, Door::Cdp), Door::Control), None, "a CDP key opens no control door");
        assert_eq!(found(&gone.key(&secret, Door::Cdp), Door::Cdp), None, "expired");
        assert_eq!(found(&secret, Door::Cdp), None, "the secret is no grant's");
        assert_eq!(found(&a.key(&Token::generate(), Door::Cdp), Door::Cdp), None, "another install's");
        let upper = a.key(&secret, Door::Cdp).as_str().to_ascii_uppercase();
        assert!(keys.find(&upper, Door::Cdp).is_some(), "hex in either case, as the install's keys");
    }

    #[test]
    fn a_person_sees_every_shared_tab_a_grant_only_its_groups() {
        let research = Access::Grant(Arc::new(grant("research", None)));
        assert!(Access::Person.sees(None) && Access::Person.sees(Some("research")));
        assert!(research.sees(Some("research")));
        assert!(!research.sees(None), "the person's own shared tabs are not a grant's");
        assert!(!research.sees(Some("other")));
        assert_eq!(research.grant_name(), Some("research"));
    }
}
