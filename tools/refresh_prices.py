"""`python -m tools.refresh_prices`: rewrite facts/aws_prices.json from the AWS Price List.

For each region it asks the AWS Price List Query API (boto3's `pricing` client: AWS credentials, a
few dozen small requests) or reads AWS's public bulk offer files saved beforehand (no credentials,
but the EC2 file of one region is gigabytes), and keeps only what the plan prices: On-Demand Linux
shared-tenancy EC2 hours of the types facts/instances.py records, ElastiCache Redis OSS node hours,
EBS gp2/gp3 GB-months, the NAT gateway hour, the public IPv4 address hour and the EKS cluster hour.
Both answer in the same product/terms shape, parsed by the same code.

    python -m tools.refresh_prices                          # the recorded regions, from the Query API
    python -m tools.refresh_prices --region eu-west-1       # add (or refresh) one region
    python -m tools.refresh_prices --offers DIR --region R  # offer files saved as DIR/<Service>-<R>.json

It needs AWS (api.pricing.us-east-1.amazonaws.com or pricing.us-east-1.amazonaws.com), which the
offline plan never has; the parsing is tested on a recorded excerpt (tests/data/aws-offer-excerpt/).
"""

from __future__ import annotations

import argparse
import datetime
import json
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from facts import prices
from facts.instances import RECORDED_EC2_ANSWERS

OFFER_URL = "https://pricing.us-east-1.amazonaws.com/offers/v1.0/aws/{service}/current/{region}/index.json"
SERVICES = ("AmazonEC2", "AmazonElastiCache", "AmazonVPC", "AmazonEKS")
Offer = Mapping[str, Any]


@dataclass(frozen=True)
class Product:
    """One SKU of an offer file with its On-Demand USD price per unit (the first price dimension)."""

    family: str
    attributes: Mapping[str, str]
    usd: float


def on_demand_products(offer: Offer) -> Iterator[Product]:
    """Every product of a bulk offer file that has an On-Demand price."""
    terms = offer.get("terms", {}).get("OnDemand", {})
    for sku, product in offer.get("products", {}).items():
        for term in terms.get(sku, {}).values():
            for dimension in term.get("priceDimensions", {}).values():
                yield Product(product.get("productFamily", ""), product.get("attributes", {}),
                              float(dimension["pricePerUnit"]["USD"]))
                break
            break


def _ec2_instance(attributes: Mapping[str, str]) -> str | None:
    wanted = {"operatingSystem": "Linux", "tenancy": "Shared", "preInstalledSw": "NA", "capacitystatus": "Used"}
    if any(attributes.get(key) != value for key, value in wanted.items()):
        return None
    if attributes.get("marketoption", "OnDemand") != "OnDemand":
        return None
    return attributes.get("instanceType")


def ec2_prices(offer: Offer) -> dict[str, Any]:
    """EC2 hours of the recorded types, EBS gp2/gp3 GB-months and the NAT gateway hour."""
    hours: dict[str, float] = {}
    ebs: dict[str, float] = {}
    nat: float | None = None
    for product in on_demand_products(offer):
        attributes = product.attributes
        if product.family == "Compute Instance":
            name = _ec2_instance(attributes)
            if name is not None and name in RECORDED_EC2_ANSWERS:
                hours[name] = product.usd
        elif product.family == "Storage" and attributes.get("volumeApiName") in ("gp2", "gp3"):
            ebs[attributes["volumeApiName"]] = product.usd
        elif product.family == "NAT Gateway" and attributes.get("usagetype", "").endswith("NatGateway-Hours"):
            nat = product.usd
    return {"ec2_on_demand_per_hour": dict(sorted(hours.items())), "ebs_per_gb_month": dict(sorted(ebs.items())),
            "nat_gateway_per_hour": nat}


def elasticache_prices(offer: Offer) -> dict[str, Any]:
    nodes = {p.attributes["instanceType"]: p.usd for p in on_demand_products(offer)
             if p.family == "Cache Instance" and p.attributes.get("cacheEngine") == "Redis"}
    return {"elasticache_node_per_hour": dict(sorted(nodes.items()))}


def vpc_prices(offer: Offer) -> dict[str, Any]:
    ipv4 = [p.usd for p in on_demand_products(offer) if p.attributes.get("usagetype", "").endswith("InUseAddress")]
    return {"public_ipv4_per_hour": ipv4[0] if ipv4 else None}


def eks_prices(offer: Offer) -> dict[str, Any]:
    clusters = [p.usd for p in on_demand_products(offer)
                if p.attributes.get("usagetype", "").endswith("AmazonEKS-Hours:perCluster")]
    return {"eks_cluster_per_hour": clusters[0] if clusters else None}


PARSERS: Mapping[str, Callable[[Offer], dict[str, Any]]] = {
    "AmazonEC2": ec2_prices, "AmazonElastiCache": elasticache_prices, "AmazonVPC": vpc_prices,
    "AmazonEKS": eks_prices,
}


def region_entry(offers: Mapping[str, Offer]) -> dict[str, Any]:
    """One region's entry of facts/aws_prices.json from its four offer files."""
    entry: dict[str, Any] = {}
    for service in SERVICES:
        entry.update(PARSERS[service](offers[service]))
    unpriced = [key for key, value in entry.items() if value is None]
    if unpriced:
        raise ValueError(f"the offer files price no {', '.join(unpriced)}")
    return entry


# The Query API filters per call; what each service's prices need (besides regionCode).
_EC2_SHARED_LINUX = {"operatingSystem": "Linux", "tenancy": "Shared", "preInstalledSw": "NA", "capacitystatus": "Used"}


def _queries(service: str) -> list[dict[str, str]]:
    if service == "AmazonEC2":
        return ([{"instanceType": name, **_EC2_SHARED_LINUX} for name in sorted(RECORDED_EC2_ANSWERS)]
                + [{"productFamily": "Storage"}, {"productFamily": "NAT Gateway"}])
    if service == "AmazonElastiCache":
        return [{"productFamily": "Cache Instance", "cacheEngine": "Redis"}]
    return [{}]  # AmazonVPC and AmazonEKS: few products per region, all of them


def query_api_offer(client: Any, service: str, region: str) -> Offer:
    """What the Query API answers for `service` in `region`, in a bulk offer file's shape."""
    products: dict[str, Any] = {}
    terms: dict[str, Any] = {}
    for wanted in _queries(service):
        filters = [{"Type": "TERM_MATCH", "Field": field, "Value": value}
                   for field, value in {"regionCode": region, **wanted}.items()]
        for page in client.get_paginator("get_products").paginate(ServiceCode=service, Filters=filters):
            for item in map(json.loads, page["PriceList"]):
                sku = item["product"]["sku"]
                products[sku] = item["product"]
                terms[sku] = item.get("terms", {}).get("OnDemand", {})
    return {"products": products, "terms": {"OnDemand": terms}}


def _query_api() -> Callable[[str, str], Offer]:
    import boto3

    client = boto3.client("pricing", region_name="us-east-1")  # the Query API's own endpoint region
    return lambda service, region: query_api_offer(client, service, region)


def _saved(directory: Path) -> Callable[[str, str], Offer]:
    return lambda service, region: json.loads((directory / f"{service}-{region}.json").read_text())


def refresh(regions: list[str], read: Callable[[str, str], Offer], source: str,
            path: Path = prices.DATA_FILE) -> None:
    data = json.loads(path.read_text())
    today = datetime.date.today().isoformat()
    for region in regions:
        data["regions"][region] = region_entry({service: read(service, region) for service in SERVICES})
    for group in ("ec2", "elasticache", "ebs", "nat_gateway", "public_ipv4", "eks"):
        data["sources"][group] = {"source": source, "as_of": today}
    path.write_text(json.dumps(data, indent=2) + "\n")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--region", action="append", help="a region to refresh (default: every recorded one)")
    parser.add_argument("--offers", type=Path, help="read saved bulk offer files from this folder, not the Query API")
    args = parser.parse_args(argv)
    regions = args.region or sorted(prices.PRICES)
    if args.offers:
        refresh(regions, _saved(args.offers), f"AWS Price List bulk offer files ({OFFER_URL})")
    else:
        refresh(regions, _query_api(), "AWS Price List Query API (GetProducts)")
    print(f"facts/aws_prices.json: {', '.join(regions)} refreshed")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
