//! The table's definition: keys, the user index, billing. One definition for the template
//! (`cloudformation_properties`, compared with `infra/template.yaml` by a test) and for local
//! endpoints (`create_if_missing`).

use aws_sdk_dynamodb::types::{
    AttributeDefinition, BillingMode, GlobalSecondaryIndex, KeySchemaElement, KeyType, Projection, ProjectionType, ScalarAttributeType,
};
use serde_json::{Value, json};

use super::{SeasonTable, TableError};

pub const PK: &str = "pk";
pub const SK: &str = "sk";
pub const GSI1: &str = "gsi1";
pub const GSI1_PK: &str = "gsi1pk";
pub const GSI1_SK: &str = "gsi1sk";

/// A key schema: the table's own, or a global secondary index's.
pub(super) struct KeySchema {
    pub(super) index: Option<&'static str>,
    pub(super) hash: &'static str,
    pub(super) range: &'static str,
}

pub(super) const TABLE_KEY: KeySchema = KeySchema { index: None, hash: PK, range: SK };
pub(super) const USER_INDEX: KeySchema = KeySchema { index: Some(GSI1), hash: GSI1_PK, range: GSI1_SK };

/// The table's definition as CloudFormation `AWS::DynamoDB::Table` properties (key schema,
/// attributes, index, billing). `infra/template.yaml` must declare exactly these; a unit test
/// compares them.
pub fn cloudformation_properties() -> Value {
    let keys = |schema: &KeySchema| json!([{"AttributeName": schema.hash, "KeyType": "HASH"}, {"AttributeName": schema.range, "KeyType": "RANGE"}]);
    let attributes: Vec<Value> = [&TABLE_KEY, &USER_INDEX]
        .iter()
        .flat_map(|schema| [schema.hash, schema.range])
        .map(|name| json!({"AttributeName": name, "AttributeType": "S"}))
        .collect();
    json!({
        "BillingMode": "PAY_PER_REQUEST",
        "AttributeDefinitions": attributes,
        "KeySchema": keys(&TABLE_KEY),
        "GlobalSecondaryIndexes": [{
            "IndexName": USER_INDEX.index,
            "KeySchema": keys(&USER_INDEX),
            "Projection": {"ProjectionType": "ALL"},
        }],
    })
}

impl SeasonTable {
    /// Creates the table with [`cloudformation_properties`]' schema unless it exists. For local
    /// endpoints and tests; in AWS the template creates it.
    pub async fn create_if_missing(&self) -> Result<(), TableError> {
        let key_schema = |schema: &KeySchema| {
            [(schema.hash, KeyType::Hash), (schema.range, KeyType::Range)]
                .map(|(name, kind)| KeySchemaElement::builder().attribute_name(name).key_type(kind).build().expect("complete"))
                .to_vec()
        };
        let attributes = [&TABLE_KEY, &USER_INDEX]
            .iter()
            .flat_map(|schema| [schema.hash, schema.range])
            .map(|name| {
                AttributeDefinition::builder().attribute_name(name).attribute_type(ScalarAttributeType::S).build().expect("complete")
            })
            .collect();
        let index = GlobalSecondaryIndex::builder()
            .index_name(GSI1)
            .set_key_schema(Some(key_schema(&USER_INDEX)))
            .projection(Projection::builder().projection_type(ProjectionType::All).build())
            .build()
            .expect("complete");
        let created = self
            .client
            .create_table()
            .table_name(&self.name)
            .billing_mode(BillingMode::PayPerRequest)
            .set_attribute_definitions(Some(attributes))
            .set_key_schema(Some(key_schema(&TABLE_KEY)))
            .global_secondary_indexes(index)
            .send()
            .await;
        match created {
            Err(e) if e.as_service_error().is_some_and(|e| e.is_resource_in_use_exception()) => Ok(()),
            other => other.map(drop).map_err(Into::into),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The template's `ArchiveTable` declares exactly this module's schema.
    #[test]
    fn the_template_declares_this_table() {
        let template: serde_norway::Value = serde_norway::from_str(include_str!("../../../../infra/template.yaml")).unwrap();
        let properties = &template["Resources"]["ArchiveTable"]["Properties"];
        let expected = cloudformation_properties();
        for (name, value) in expected.as_object().unwrap() {
            let declared: Value = serde_norway::from_value(properties[name.as_str()].clone()).unwrap();
            assert_eq!(&declared, value, "infra/template.yaml ArchiveTable.Properties.{name}");
        }
    }
}
