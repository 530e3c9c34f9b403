import streamlit as st

st.title("grpo_objective")
st.info("This page is being built.")
