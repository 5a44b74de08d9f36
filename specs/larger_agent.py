"""specs/larger.yaml's task as an agent program (docs/envs.md, "Bring your own agent"): the OpenAI
client, one question, the reward computed here. `ragen train specs/larger-agent.yaml`."""

import re


def run(client, row):
    reply = client.chat.completions.create(model="policy", messages=[
        {"role": "system", "content": "Compare the two numbers."},
        {"role": "user", "content": row["prompt"] + " Answer with the larger number only."}])
    number = re.search(r"\d+", reply.choices[0].message.content or "")
    return float(number is not None and number.group() == row["answer"])
