import streamlit as st

st.title("ratio_clip")
st.info("This page is being built.")
