//! Topics and the cluster's shape: Metadata and DescribeCluster, DescribeTopicPartitions,
//! CreateTopics, DeleteTopics, CreatePartitions, ElectLeaders,
//! Alter/ListPartitionReassignments.

pub(crate) mod admin;
pub(crate) mod elect_leaders;
pub(crate) mod metadata;
pub(crate) mod reassignments;
pub(crate) mod topic_partitions;
