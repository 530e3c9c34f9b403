import streamlit as st

st.title("ppo_vs_grpo")
st.info("This page is being built.")
