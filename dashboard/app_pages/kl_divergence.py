import streamlit as st

st.title("kl_divergence")
st.info("This page is being built.")
