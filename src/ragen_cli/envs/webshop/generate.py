"""Generate the shipped WebShop catalogue in the original WebShop file schema.

    python -m ragen_cli.envs.webshop.generate [OUT_DIR]

writes `items_shuffle.json` (products), `items_ins_v2.json` (attributes), `items_human_ins.json`
(goal instructions) and `reviews.json`; deterministic (numpy generator, seed 2025). Six product
types x 50 products; every product gets two goals that name 1-2 of its attributes and one value
per option, phrased like WebShop's human instructions."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np

from ragen_cli.envs.webshop.catalogue import SHIPPED_DIR

COLORS = ["black", "white", "navy blue", "heather gray", "red", "olive green", "pink", "beige", "brown", "purple"]
TYPES = [
    {"category": "fashion", "query": "men's t-shirts", "nouns": ["t-shirt", "tee shirt"],
     "product_category": "Clothing, Shoes & Jewelry › Men › Clothing › Shirts › T-Shirts",
     "styles": ["crew neck", "v-neck", "henley", "pocket", "graphic"],
     "attributes": ["machine wash", "cotton", "short sleeve", "long sleeve", "slim fit", "moisture wicking", "relaxed fit", "tagless"],
     "options": {"color": COLORS, "size": ["small", "medium", "large", "x-large", "xx-large"]}, "price": (8, 35)},
    {"category": "fashion", "query": "women's running shoes", "nouns": ["running shoes", "sneakers"],
     "product_category": "Clothing, Shoes & Jewelry › Women › Shoes › Athletic › Running",
     "styles": ["trail", "road", "walking", "cushioned", "minimalist"],
     "attributes": ["lightweight", "breathable mesh", "rubber sole", "arch support", "non slip", "memory foam", "wide toe box"],
     "options": {"color": COLORS, "size": ["6", "6.5", "7", "7.5", "8", "8.5", "9", "10"]}, "price": (30, 120)},
    {"category": "electronics", "query": "wireless headphones", "nouns": ["headphones", "earbuds"],
     "product_category": "Electronics › Headphones, Earbuds & Accessories › Headphones",
     "styles": ["over-ear", "on-ear", "in-ear", "sport", "studio"],
     "attributes": ["noise cancelling", "bluetooth 5.0", "long battery life", "fast charging", "built-in microphone", "water resistant", "foldable"],
     "options": {"color": ["black", "white", "silver", "rose gold", "midnight blue"]}, "price": (20, 200)},
    {"category": "grocery", "query": "coffee", "nouns": ["coffee", "coffee beans"],
     "product_category": "Grocery & Gourmet Food › Beverages › Coffee, Tea & Cocoa › Coffee",
     "styles": ["colombian", "espresso", "breakfast blend", "french roast", "single origin"],
     "attributes": ["organic", "fair trade", "dark roast", "medium roast", "decaf", "whole bean", "gluten free", "non gmo"],
     "options": {"flavor name": ["original", "vanilla", "hazelnut", "caramel", "mocha"],
                 "size": ["12 ounce", "2 pound", "32 ounce (pack of 2)"]}, "price": (6, 45)},
    {"category": "beauty", "query": "shampoo", "nouns": ["shampoo"],
     "product_category": "Beauty & Personal Care › Hair Care › Shampoo & Conditioner › Shampoos",
     "styles": ["moisturizing", "clarifying", "volumizing", "repair", "daily"],
     "attributes": ["sulfate free", "paraben free", "natural ingredients", "for dry hair", "color safe", "cruelty free", "argan oil", "tea tree"],
     "options": {"scent": ["unscented", "lavender", "coconut", "citrus", "mint"], "size": ["8 fl oz", "16 fl oz", "33.8 fl oz"]},
     "price": (5, 40)},
    {"category": "furniture", "query": "office chairs", "nouns": ["office chair", "desk chair"],
     "product_category": "Home & Kitchen › Furniture › Home Office Furniture › Home Office Chairs",
     "styles": ["executive", "task", "gaming", "high back", "mid back"],
     "attributes": ["lumbar support", "height adjustable", "easy assembly", "ergonomic", "mesh back", "padded armrests", "360 degree swivel"],
     "options": {"color": ["black", "gray", "white", "blue", "brown"]}, "price": (60, 300)},
]
BRANDS = ["Northpeak", "Aurelia", "Kestrel", "Lumio", "Bramblewood", "Orion & Co", "Vantia", "Solace",
          "Marlowe", "Tidewell", "Quillon", "Evergrove"]
OPENERS = ["i am looking for", "i need", "i want to buy", "find me", "i would like"]
PER_TYPE = 50


def _pick(rng, items, k):
    idx = sorted(rng.choice(len(items), size=k, replace=False))
    return [items[i] for i in idx]


def _product(rng, t: dict, n: int) -> tuple[dict, dict, dict]:
    asin = "B0" + "".join(rng.choice(list("0123456789ABCDEFGHJKLMNPQRSTUVWXYZ"), size=8))
    brand, noun, style = (str(rng.choice(x)) for x in (BRANDS, t["nouns"], t["styles"]))
    attrs = _pick(rng, t["attributes"], 3)
    title = f"{brand} {attrs[0].title()} {style.title()} {noun.title()}"
    options = {name: _pick(rng, values, min(len(values), int(rng.integers(2, 5))))
               for name, values in t["options"].items()}
    lo, hi = t["price"]
    price = round(float(rng.uniform(lo, hi)), 2)
    pricing = f"${price}" if rng.random() < 0.8 else f"${price} - ${round(price * 1.2, 2)}"
    bullets = [f"{a.capitalize()}: made to last, tested for everyday use." for a in attrs]
    description = (f"The {brand} {style} {noun}. Features: {', '.join(attrs)}. "
                   f"Designed by {brand} for people who want a reliable {noun}.")
    raw = {"asin": asin, "name": title, "category": t["category"], "query": t["query"],
           "product_category": t["product_category"], "full_description": description,
           "small_description": bullets, "pricing": pricing, "images": [None],
           "customization_options": {k: [{"value": v, "image": None} for v in vs] for k, vs in options.items()}}
    stars = [int(rng.integers(2, 6)) for _ in range(int(rng.integers(0, 4)))]
    review = {"asin": asin, "average_rating": round(sum(stars) / len(stars), 1) if stars else "N.A.",
              "reviews": [{"title": "Review", "stars": s, "review": f"{'Great' if s >= 4 else 'Okay'} {noun}, "
                           f"{attrs[n % 3]} as described."} for n, s in enumerate(stars)]}
    return raw, {"attributes": attrs}, review


def _instruction(rng, t: dict, raw: dict, attrs: list[str]) -> dict:
    goal_attrs = _pick(rng, attrs, int(rng.integers(1, 3)))
    noun = next(n for n in t["nouns"] if n in raw["name"].lower())
    chosen, parts = [], []
    for name, values in raw["customization_options"].items():
        value = str(rng.choice([v["value"] for v in values]))
        chosen.append(value)
        parts.append({"color": f"in {value}", "size": f"in size {value}"}.get(name, f"with {value} {name.split()[0]}"))
    text = f"{rng.choice(OPENERS)} {' and '.join(goal_attrs)} {noun} {', '.join(parts)}".strip()
    return {"instruction": text, "instruction_attributes": goal_attrs, "instruction_options": chosen}


def generate(out_dir: Path) -> None:
    rng = np.random.default_rng(2025)
    products, attrs, human, reviews = [], {}, {}, []
    for t in TYPES:
        for n in range(PER_TYPE):
            raw, attr, review = _product(rng, t, n)
            products.append(raw)
            attrs[raw["asin"]] = attr
            reviews.append(review)
            human[raw["asin"]] = [_instruction(rng, t, raw, attr["attributes"]) for _ in range(2)]
    order = rng.permutation(len(products))  # items_shuffle: products in shuffled order
    products = [products[i] for i in order]
    out_dir.mkdir(parents=True, exist_ok=True)
    for name, data in [("items_shuffle.json", products), ("items_ins_v2.json", attrs),
                       ("items_human_ins.json", human), ("reviews.json", reviews)]:
        (out_dir / name).write_text(json.dumps(data, indent=0, ensure_ascii=False) + "\n")


if __name__ == "__main__":
    generate(Path(sys.argv[1]) if len(sys.argv) > 1 else SHIPPED_DIR)
