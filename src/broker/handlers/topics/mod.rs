//! Topics and the cluster's shape: Metadata and DescribeCluster, DescribeTopicPartitions,
//! CreateTopics, DeleteTopics, CreatePartitions, ElectLeaders.

pub(crate) mod admin;
pub(crate) mod elect_leaders;
pub(crate) mod metadata;
pub(crate) mod topic_partitions;
