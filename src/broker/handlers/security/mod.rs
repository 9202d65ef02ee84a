//! Who may do what: the request-side authorizer (`authz`), the ACL APIs (`acls`) and the
//! SCRAM credential APIs (`scram`), the client quota APIs (`quotas`)
//! and their enforcement (`throttle`, with `throttle_field` for the responses' field).

pub(crate) mod acls;
pub(crate) mod authz;
pub(crate) mod quotas;
pub(crate) mod scram;
pub(crate) mod throttle;
pub(crate) mod throttle_field;
