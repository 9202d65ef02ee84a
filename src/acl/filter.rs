//! ACL binding filters, as DescribeAcls and DeleteAcls carry them (Kafka's `AclBindingFilter`):
//! each field either a value or ANY (here `None`); the pattern type may also be MATCH, which
//! selects every binding that would apply to the named resource.

use super::binding::{
    AclBinding, Operation, PatternType, Permission, ResourceType, WILDCARD_RESOURCE,
};

/// A filter's pattern type.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PatternFilter {
    Any,
    /// The bindings that apply to the resource: LITERAL of the name, LITERAL `*`, and PREFIXED
    /// patterns the name starts with.
    Match,
    Exactly(PatternType),
}

impl PatternFilter {
    /// From the wire code (1 ANY, 2 MATCH, 3 LITERAL, 4 PREFIXED); 0 UNKNOWN and anything else
    /// are not a filter.
    pub fn from_code(code: i8) -> Option<PatternFilter> {
        match code {
            1 => Some(PatternFilter::Any),
            2 => Some(PatternFilter::Match),
            c => PatternType::from_code(c).map(PatternFilter::Exactly),
        }
    }
}

/// Code 1 is ANY in every ACL enum.
const ANY: i8 = 1;

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AclFilter {
    pub resource_type: Option<ResourceType>,
    pub resource_name: Option<String>,
    pub pattern: PatternFilter,
    pub principal: Option<String>,
    pub host: Option<String>,
    pub operation: Option<Operation>,
    pub permission: Option<Permission>,
}

/// A filter with an UNKNOWN (or out-of-range) field: Kafka refuses it with INVALID_REQUEST.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UnknownFilter(pub &'static str);

impl AclFilter {
    /// The filter that matches every binding.
    pub fn any() -> AclFilter {
        AclFilter {
            resource_type: None,
            resource_name: None,
            pattern: PatternFilter::Any,
            principal: None,
            host: None,
            operation: None,
            permission: None,
        }
    }

    /// A filter from wire codes (ANY is 1 in each enum), refused as Kafka's
    /// `AclControlManager.validateFilter` refuses one with an UNKNOWN field.
    pub fn from_codes(
        resource_type: i8,
        resource_name: Option<String>,
        pattern: i8,
        principal: Option<String>,
        host: Option<String>,
        operation: i8,
        permission: i8,
    ) -> Result<AclFilter, UnknownFilter> {
        let pattern_part = "Unknown patternFilter.";
        let entry_part = "Unknown entryFilter.";
        let resource_type = match resource_type {
            ANY => None,
            c => Some(ResourceType::from_code(c).ok_or(UnknownFilter(pattern_part))?),
        };
        let pattern = PatternFilter::from_code(pattern).ok_or(UnknownFilter(pattern_part))?;
        let operation = match operation {
            ANY => None,
            c => Some(Operation::from_code(c).ok_or(UnknownFilter(entry_part))?),
        };
        let permission = match permission {
            ANY => None,
            c => Some(Permission::from_code(c).ok_or(UnknownFilter(entry_part))?),
        };
        Ok(AclFilter {
            resource_type,
            resource_name,
            pattern,
            principal,
            host,
            operation,
            permission,
        })
    }

    /// Whether `binding` passes: Kafka's `ResourcePatternFilter.matches` and
    /// `AccessControlEntryFilter.matches`.
    pub fn matches(&self, binding: &AclBinding) -> bool {
        self.matches_pattern(binding) && self.matches_entry(binding)
    }

    fn matches_pattern(&self, b: &AclBinding) -> bool {
        if self.resource_type.is_some_and(|t| t != b.resource_type) {
            return false;
        }
        if let PatternFilter::Exactly(p) = self.pattern {
            if p != b.pattern_type {
                return false;
            }
        }
        let Some(name) = &self.resource_name else {
            return true;
        };
        match self.pattern {
            PatternFilter::Any | PatternFilter::Exactly(_) => *name == b.resource_name,
            PatternFilter::Match => match b.pattern_type {
                PatternType::Literal => {
                    *name == b.resource_name || b.resource_name == WILDCARD_RESOURCE
                }
                PatternType::Prefixed => name.starts_with(&b.resource_name),
            },
        }
    }

    fn matches_entry(&self, b: &AclBinding) -> bool {
        self.principal.as_ref().is_none_or(|p| *p == b.principal)
            && self.host.as_ref().is_none_or(|h| *h == b.host)
            && self.operation.is_none_or(|o| o == b.operation)
            && self.permission.is_none_or(|p| p == b.permission)
    }
}
