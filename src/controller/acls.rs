//! CreateAcls and DeleteAcls decided against the committed image (Kafka's
//! `AclControlManager`): a valid new binding becomes an `AccessControlEntry` record under a
//! fresh id, unless the image (or an earlier creation of the same request) already holds it,
//! which succeeds without a record; each delete filter removes every stored binding it
//! matches, and reports them. Filters of one request may match the same binding: it is
//! removed once and reported by each.

use std::collections::BTreeSet;

use uuid::Uuid;

use super::{MetadataImage, MetadataRecord};
use crate::acl::{AclBinding, AclFilter, InvalidAcl, UnknownFilter};

/// The most ACL records one request may write (Kafka's `MAX_RECORDS_PER_USER_OP`).
pub const MAX_ACL_RECORDS: usize = 10_000;

/// The result of one creation: stored (or already there), or refused with INVALID_REQUEST.
pub type CreateResult = Result<(), InvalidAcl>;

/// Decides a CreateAcls request. `ids` gives one fresh id per creation (the driver's entropy).
/// Refuses the whole request past [`MAX_ACL_RECORDS`].
pub fn create_acls(
    image: &MetadataImage,
    creations: Vec<Result<AclBinding, InvalidAcl>>,
    mut ids: impl FnMut() -> Uuid,
) -> Result<(Vec<MetadataRecord>, Vec<CreateResult>), super::ControllerError> {
    let mut records = Vec::new();
    let mut added: BTreeSet<AclBinding> = BTreeSet::new();
    let mut results = Vec::with_capacity(creations.len());
    for creation in creations {
        match creation {
            Err(e) => results.push(Err(e)),
            Ok(acl) => {
                if !image.acls().contains(&acl) && added.insert(acl.clone()) {
                    let id = fresh(image, &records, &mut ids);
                    records.push(MetadataRecord::AccessControlEntry { id, acl });
                }
                results.push(Ok(()));
            }
        }
    }
    if records.len() > MAX_ACL_RECORDS {
        return Err(super::ControllerError::TooLarge);
    }
    Ok((records, results))
}

/// An id neither stored nor used by an earlier record of this request (ids come from entropy;
/// a collision is drawn again).
fn fresh(
    image: &MetadataImage,
    records: &[MetadataRecord],
    ids: &mut impl FnMut() -> Uuid,
) -> Uuid {
    loop {
        let id = ids();
        let taken = id.is_nil()
            || image.acls().get(id).is_some()
            || records.iter().any(
                |r| matches!(r, MetadataRecord::AccessControlEntry { id: used, .. } if *used == id),
            );
        if !taken {
            return id;
        }
    }
}

/// One filter's outcome: the bindings it matched (and removed), or its refusal.
pub type DeleteResult = Result<Vec<AclBinding>, UnknownFilter>;

/// Decides a DeleteAcls request.
pub fn delete_acls(
    image: &MetadataImage,
    filters: Vec<Result<AclFilter, UnknownFilter>>,
) -> Result<(Vec<MetadataRecord>, Vec<DeleteResult>), super::ControllerError> {
    let mut removed: BTreeSet<Uuid> = BTreeSet::new();
    let mut results = Vec::with_capacity(filters.len());
    for filter in filters {
        match filter {
            Err(e) => results.push(Err(e)),
            Ok(filter) => {
                let matched: Vec<(Uuid, &AclBinding)> = image.acls().matching(&filter).collect();
                removed.extend(matched.iter().map(|(id, _)| *id));
                results.push(Ok(matched.into_iter().map(|(_, b)| b.clone()).collect()));
            }
        }
    }
    if removed.len() > MAX_ACL_RECORDS {
        return Err(super::ControllerError::TooLarge);
    }
    let records = removed
        .into_iter()
        .map(|id| MetadataRecord::RemoveAccessControlEntry { id })
        .collect();
    Ok((records, results))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::acl::{Operation, PatternFilter, PatternType, Permission, ResourceType};

    fn binding(name: &str, op: Operation) -> AclBinding {
        AclBinding {
            resource_type: ResourceType::Topic,
            resource_name: name.into(),
            pattern_type: PatternType::Literal,
            principal: "User:a".into(),
            host: "*".into(),
            operation: op,
            permission: Permission::Allow,
        }
    }

    fn counter() -> impl FnMut() -> Uuid {
        let mut n = 0;
        move || {
            n += 1;
            Uuid::from_u64_pair(0, n)
        }
    }

    fn apply(image: &mut MetadataImage, records: &[MetadataRecord]) {
        for r in records {
            let offset = image.applied();
            image.apply(offset, r);
        }
    }

    #[test]
    fn creations_store_each_binding_once() {
        let mut image = MetadataImage::default();
        let a = binding("t", Operation::Read);
        let (records, results) = create_acls(
            &image,
            vec![Ok(a.clone()), Ok(a.clone()), Err(InvalidAcl("bad".into()))],
            counter(),
        )
        .unwrap();
        assert_eq!(records.len(), 1);
        assert_eq!(results[..2], [Ok(()), Ok(())]);
        assert!(results[2].is_err());
        apply(&mut image, &records);
        // Already stored: success, no record.
        let (records, results) = create_acls(&image, vec![Ok(a)], counter()).unwrap();
        assert!(records.is_empty());
        assert_eq!(results, vec![Ok(())]);
    }

    #[test]
    fn a_colliding_id_is_drawn_again() {
        let mut image = MetadataImage::default();
        let (records, _) =
            create_acls(&image, vec![Ok(binding("t", Operation::Read))], counter()).unwrap();
        apply(&mut image, &records);
        let (records, _) =
            create_acls(&image, vec![Ok(binding("u", Operation::Read))], counter()).unwrap();
        assert!(matches!(
            records[0],
            MetadataRecord::AccessControlEntry { id, .. } if id == Uuid::from_u64_pair(0, 2)
        ));
    }

    #[test]
    fn deletes_remove_what_filters_match_once() {
        let mut image = MetadataImage::default();
        let (records, _) = create_acls(
            &image,
            vec![
                Ok(binding("t", Operation::Read)),
                Ok(binding("t", Operation::Write)),
                Ok(binding("u", Operation::Write)),
            ],
            counter(),
        )
        .unwrap();
        apply(&mut image, &records);
        let on_t = AclFilter {
            resource_type: Some(ResourceType::Topic),
            resource_name: Some("t".into()),
            pattern: PatternFilter::Match,
            ..AclFilter::any()
        };
        let writes = AclFilter {
            operation: Some(Operation::Write),
            ..AclFilter::any()
        };
        let (records, results) = delete_acls(
            &image,
            vec![
                Ok(on_t),
                Ok(writes),
                Err(UnknownFilter("Unknown entryFilter.")),
            ],
        )
        .unwrap();
        assert_eq!(results[0].as_ref().unwrap().len(), 2);
        assert_eq!(results[1].as_ref().unwrap().len(), 2);
        assert!(results[2].is_err());
        assert_eq!(records.len(), 3, "t/WRITE removed once");
        apply(&mut image, &records);
        assert!(image.acls().is_empty());
    }
}
