"""The price refresh parses AWS's offer files: a recorded excerpt (tests/data/aws-offer-excerpt/README.md)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from facts import prices
from tools import refresh_prices

EXCERPT = Path(__file__).resolve().parents[1] / "data" / "aws-offer-excerpt"


def excerpt_entry() -> dict:
    return refresh_prices.region_entry(
        {service: json.loads((EXCERPT / f"{service}-us-east-1.json").read_text())
         for service in refresh_prices.SERVICES})


def test_the_excerpt_gives_the_prices_the_plan_uses_and_skips_the_rest():
    entry = excerpt_entry()
    # Linux on-demand only (not Windows, an unused reservation or a Capacity Block), recorded types only.
    assert entry["ec2_on_demand_per_hour"] == {"g6.8xlarge": 2.0144, "m7i.xlarge": 0.2016, "p5.48xlarge": 55.04}
    assert entry["ebs_per_gb_month"] == {"gp2": 0.10, "gp3": 0.08}
    assert entry["nat_gateway_per_hour"] == 0.045  # the hour, not the per-GB processing charge
    assert entry["elasticache_node_per_hour"] == {"cache.t4g.small": 0.032}  # Redis OSS, not Valkey
    assert (entry["public_ipv4_per_hour"], entry["eks_cluster_per_hour"]) == (0.005, 0.10)


def test_the_excerpt_agrees_with_the_snapshot_the_plan_reads():
    entry = excerpt_entry()
    recorded = prices.PRICES["us-east-1"]
    for name, usd in entry["ec2_on_demand_per_hour"].items():
        assert recorded.ec2_on_demand_per_hour[name] == usd
    assert recorded.elasticache_node_per_hour == entry["elasticache_node_per_hour"]


def test_a_refresh_from_saved_offer_files_adds_a_region_with_todays_date(tmp_path):
    data = tmp_path / "aws_prices.json"
    shutil.copy(prices.DATA_FILE, data)
    offers = tmp_path / "offers"
    offers.mkdir()
    for service in refresh_prices.SERVICES:
        shutil.copy(EXCERPT / f"{service}-us-east-1.json", offers / f"{service}-eu-west-1.json")
    refresh_prices.refresh(["eu-west-1"], refresh_prices._saved(offers), "saved offer files", data)
    snapshot = prices.load(data)
    assert snapshot.prices["eu-west-1"].ec2_on_demand_per_hour["p5.48xlarge"] == 55.04
    assert snapshot.prices["us-west-2"] == prices.PRICES["us-west-2"]  # other regions untouched
    assert snapshot.sources["ec2"].source == "saved offer files"


def test_an_offer_file_missing_a_price_is_refused_naming_it():
    empty = {"products": {}, "terms": {"OnDemand": {}}}
    with pytest.raises(ValueError, match="price no nat_gateway_per_hour"):
        refresh_prices.region_entry(dict.fromkeys(refresh_prices.SERVICES, empty))


def test_the_query_api_answers_are_read_as_an_offer_file():
    """GetProducts returns each product with its terms as a JSON string; stubbed with the excerpt's products."""
    import boto3
    from botocore.stub import Stubber

    offer = json.loads((EXCERPT / "AmazonElastiCache-us-east-1.json").read_text())
    answers = [json.dumps({"product": product, "terms": {"OnDemand": offer["terms"]["OnDemand"][sku]}})
               for sku, product in offer["products"].items() if product["attributes"]["cacheEngine"] == "Redis"]
    client = boto3.client("pricing", region_name="us-east-1", aws_access_key_id="x", aws_secret_access_key="x")
    with Stubber(client) as stub:
        asked = [{"Type": "TERM_MATCH", "Field": field, "Value": value} for field, value in
                 (("regionCode", "us-east-1"), ("productFamily", "Cache Instance"), ("cacheEngine", "Redis"))]
        stub.add_response("get_products", {"PriceList": answers, "FormatVersion": "aws_v1"},
                          {"ServiceCode": "AmazonElastiCache", "Filters": asked})
        read = refresh_prices.query_api_offer(client, "AmazonElastiCache", "us-east-1")
    assert refresh_prices.elasticache_prices(read) == {"elasticache_node_per_hour": {"cache.t4g.small": 0.032}}
